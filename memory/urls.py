from __future__ import annotations

from django.urls import path

from memory import views

app_name = "memory"

urlpatterns = [
    path("", views.home, name="home"),
    path("off-the-record/", views.off_the_record, name="off_the_record"),
    path("questions/<uuid:conflict_id>/answer/", views.answer_conflict, name="answer_conflict"),
    path("<uuid:entry_id>/", views.detail, name="detail"),
    path("<uuid:entry_id>/edit/", views.edit, name="edit"),
    path("<uuid:entry_id>/forget/", views.forget, name="forget"),
    path("<uuid:entry_id>/pause/", views.pause, name="pause"),
    path("<uuid:entry_id>/resume/", views.resume, name="resume"),
    path("<uuid:entry_id>/scope/", views.change_scope, name="scope"),
]
