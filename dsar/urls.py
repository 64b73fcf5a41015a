from __future__ import annotations

from django.urls import path

from dsar import views

app_name = "dsar"

urlpatterns = [
    path("", views.home, name="home"),
    path("export/", views.file_export, name="file_export"),
    path("delete/", views.file_delete, name="file_delete"),
    path("access/", views.file_access, name="file_access"),
    path("<uuid:request_id>/cancel/", views.cancel, name="cancel"),
    path("<uuid:request_id>/appeal/", views.appeal, name="appeal"),
    path("<uuid:request_id>/undo/", views.undo, name="undo"),
    path("<uuid:request_id>/code/", views.send_code, name="send_code"),
    path("<uuid:request_id>/verify/", views.verify, name="verify"),
    path("<uuid:request_id>/download/", views.download, name="download"),
    path("<uuid:request_id>/report/", views.report, name="report"),
    path("queue/", views.queue, name="queue"),
    path("queue/<uuid:request_id>/", views.queue_item, name="queue_item"),
    path("queue/<uuid:request_id>/verify/", views.queue_verify, name="queue_verify"),
    path("queue/<uuid:request_id>/start/", views.queue_start, name="queue_start"),
    path("queue/<uuid:request_id>/extend/", views.queue_extend, name="queue_extend"),
    path("queue/<uuid:request_id>/complete/", views.queue_complete, name="queue_complete"),
    path("queue/<uuid:request_id>/fail/", views.queue_fail, name="queue_fail"),
    path("queue/members/<uuid:member_id>/hold/", views.hold_place, name="hold_place"),
    path("queue/members/<uuid:member_id>/hold/lift/", views.hold_lift, name="hold_lift"),
]
