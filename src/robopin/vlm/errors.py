"""Named exceptions of the VLM backends, so callers can tell a dead server from a bad answer."""

from __future__ import annotations

from robopin.registry import UnknownTypeError


class VLMError(RuntimeError):
    """Base class of every error a VLM backend raises."""


class VLMConfigError(VLMError, ValueError):
    """A backend configuration value is invalid (the message names the field and the value)."""


class UnknownBackendError(VLMConfigError, UnknownTypeError):
    """No backend is registered under the requested type name."""


class BackendUnavailableError(VLMError):
    """The backend's optional dependency (httpx, torch, transformers, …) is not installed."""


class VLMConnectionError(VLMError):
    """The server could not be reached (refused, DNS, reset) after the configured retries."""


class VLMTimeoutError(VLMError):
    """The server did not answer within the configured timeout after the configured retries."""


class VLMServerError(VLMError):
    """The server answered with an HTTP error status that retrying did not cure."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class VLMModelNotFoundError(VLMServerError):
    """The server does not serve the configured model name."""


class VLMResponseError(VLMError):
    """The server or model answered, but not in the shape the request asked for."""


class VLMRequestError(VLMError, ValueError):
    """The caller's request is invalid (bad messages, n < 1, an image the backend cannot take)."""


class VLMCanceledError(VLMError):
    """The call was canceled (:meth:`robopin.vlm.base.VLMBackend.cancel`) while it was in flight; its
    HTTP request was abandoned and no further request was sent for it."""
