from django.urls import path

from . import views

app_name = "studies"

urlpatterns = [
    path("", views.study_list, name="study_list"),
    path("<slug:slug>/", views.study_detail, name="study_detail"),
    path("<slug:slug>/import/", views.study_import, name="study_import"),
    path("<slug:slug>/report/", views.study_report, name="study_report"),
    path("<slug:slug>/report/build/", views.study_report_build, name="study_report_build"),
    path("<slug:slug>/report/files/<str:name>", views.study_report_file, name="study_report_file"),
    path("<slug:slug>/jobs/<int:job_id>/", views.job_status, name="job_status"),
]
