"""Serving the engine: the worker process that hosts engine and model, its wire protocol,
the step scheduler that batches concurrent requests, and the client.

The worker is the one place where a model is loaded (model.loading) and handed to the
engine. docs/PROTOCOL.md specifies the protocol.
"""
