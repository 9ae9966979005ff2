"""Deployment artefacts: images' dependency sets, Dockerfiles, compose, Kubernetes manifests."""
