"""The Temporal faces: activity definitions over the library (``durable_rollouts``), its errors translated
into activity errors, heartbeats.

This package's ``__init__`` stays import-free so that workflow code can import ``activities.activity_refs``
without dragging in aiohttp, transformers or docker.
"""
