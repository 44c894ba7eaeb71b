"""Cloud Resource Manager's ``Projects.GetProject``, for the rehearsal's one project.

The Vertex AI SDK asks it when its project comes from ``GOOGLE_CLOUD_PROJECT`` (which may
hold a project number) rather than from ``aiplatform.init(project=...)``: the README's
``aiplatform.Endpoint(ENDPOINT_ID, ...)`` does. Unanswered, the SDK retries for a minute,
then goes on with the number it was given. The rehearsal's project number is its project
id (resource names carry the id throughout; looking a number up needs the real API).
"""

from __future__ import annotations

import grpc
from google.cloud import resourcemanager_v3

SERVICE = "google.cloud.resourcemanager.v3.Projects"


class Projects:
    def __init__(self, project: str) -> None:
        self.project = project

    def add_to_server(self, server: grpc.Server) -> None:
        handler = grpc.unary_unary_rpc_method_handler(
            self._get_project,
            request_deserializer=resourcemanager_v3.GetProjectRequest.deserialize,
            response_serializer=resourcemanager_v3.Project.serialize,
        )
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {"GetProject": handler})])

    def _get_project(self, request: resourcemanager_v3.GetProjectRequest, context: grpc.ServicerContext):
        if request.name != f"projects/{self.project}":
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"the rehearsal has one project, {self.project}")
        return resourcemanager_v3.Project(
            name=f"projects/{self.project}",
            project_id=self.project,
            state=resourcemanager_v3.Project.State.ACTIVE,
        )
