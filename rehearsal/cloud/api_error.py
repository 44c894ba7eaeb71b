"""A Vertex AI request the stand-ins refuse, as gRPC (a status) and REST (Google's JSON
error body with the matching HTTP status) both answer it."""

from __future__ import annotations

import grpc
from google.rpc import status_pb2


class ApiError(Exception):
    """An RPC's failure: a gRPC status code (HTTP status and Google error ``status`` follow)."""

    HTTP = {
        grpc.StatusCode.INVALID_ARGUMENT: 400,
        grpc.StatusCode.FAILED_PRECONDITION: 400,
        grpc.StatusCode.NOT_FOUND: 404,
        grpc.StatusCode.ALREADY_EXISTS: 409,
        grpc.StatusCode.UNAVAILABLE: 503,
    }

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message

    @property
    def http_status(self) -> int:
        return self.HTTP.get(self.code, 500)

    def status(self) -> status_pb2.Status:
        return status_pb2.Status(code=self.code.value[0], message=self.message)

    def json(self) -> dict:
        return {"error": {"code": self.http_status, "message": self.message, "status": self.code.name}}
