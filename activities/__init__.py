"""Everything with side effects: sandboxes, the adapter, grading, policy I/O.

This package's ``__init__`` stays import-free so that workflow code can import
``contracts.rollout`` without dragging in aiohttp, transformers or docker.
"""
