from __future__ import annotations

from django.urls import path

from memory import views

app_name = "memory"

urlpatterns = [
    path("", views.home, name="home"),
    path("off-the-record/", views.off_the_record, name="off_the_record"),
    path("questions/<uuid:conflict_id>/answer/", views.answer_conflict, name="answer_conflict"),
    path("forgotten/", views.forgotten, name="forgotten"),
    path("forget/topic/", views.forget_topic, name="forget_topic"),
    path("forget/everything/", views.forget_everything, name="forget_everything"),
    path("<uuid:entry_id>/", views.detail, name="detail"),
    path("<uuid:entry_id>/edit/", views.edit, name="edit"),
    path("<uuid:entry_id>/forget/", views.forget, name="forget"),
    path("<uuid:entry_id>/pause/", views.pause, name="pause"),
    path("<uuid:entry_id>/resume/", views.resume, name="resume"),
    path("<uuid:entry_id>/scope/", views.change_scope, name="scope"),
    path("<uuid:entry_id>/confirm/", views.confirm, name="confirm"),
    path("<uuid:entry_id>/reject/", views.reject, name="reject"),
    path("<uuid:entry_id>/restore/", views.restore, name="restore"),
]
