"""Local stand-ins for the Google Cloud services a rehearsed task calls: Cloud Storage, the
OAuth token endpoint, Vertex AI Training and Vertex AI endpoints, reached through a local
TLS-terminating proxy."""
