"""Serving a class: replicas behind nginx (serve.sh), their warm-up (warm.py) and the cluster driver the tests use."""
