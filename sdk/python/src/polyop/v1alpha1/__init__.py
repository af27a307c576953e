"""Code generated from proto/polyop/v1alpha1 by `make generate-proto`: messages
(``*_pb2``), gRPC stubs and servicers (``*_pb2_grpc``) and their type stubs.

The contract's comments are the generated classes' docstrings. Most sidecars
use the ``polyop`` package instead; the generated code is for everything it
does not cover.
"""
