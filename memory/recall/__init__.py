"""Recall: the pipeline, its database paths, the service and the API."""
