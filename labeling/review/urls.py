from django.urls import path

from labeling.review import views

urlpatterns = [
    path("items/<int:item_id>/", views.item_detail, name="item_detail"),
    path("items/<int:item_id>/similar", views.item_similar, name="item_similar"),
    path("items/<int:item_id>/reveal", views.item_reveal, name="item_reveal"),
    path("items/<int:item_id>/undo-label", views.item_label_undo, name="item_label_undo"),
    path("review/", views.review_queue, name="review_queue"),
    path("review/next", views.review_next, name="review_next"),
    path("review/skip", views.review_skip, name="review_skip"),
    path("agreement/", views.agreement, name="agreement"),
    path("agreement/sample", views.agreement_sample, name="agreement_sample"),
    path("agreement/settle", views.agreement_settle, name="agreement_settle"),
]
