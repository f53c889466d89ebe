"""The OpenAPI 3.1 description of the master's HTTP API, built from the answer models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from master.calls.files import FILE_READS_AT_ONCE
from master.http.models import (
    Events,
    Frameworks,
    Health,
    Limits,
    Offers,
    Problem,
    Roles,
    Slaves,
    TaskFile,
    Tasks,
)
from master.http.snapshot import SLAVE_SORTS, TASK_SORTS
from protocol.wire.messages import State
from protocol.wire.why import Why

REF = "#/components/schemas/{model}"
MODELS: list[type[BaseModel]] = [
    State,
    Frameworks,
    Slaves,
    Tasks,
    Offers,
    Roles,
    Limits,
    Events,
    TaskFile,
    Why,
    Health,
    Problem,
]


def _page_params() -> list[dict[str, Any]]:
    return [
        {"name": "offset", "in": "query", "schema": {"type": "integer", "minimum": 0}},
        {
            "name": "limit",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1, "maximum": 1000},
        },
    ]


def _get(summary: str, model: str, params: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "get": {
            "summary": summary,
            "parameters": params or [],
            "responses": {
                "200": {
                    "description": "OK",
                    "content": {"application/json": {"schema": {"$ref": REF.format(model=model)}}},
                },
                "401": {"description": "Operator credentials needed (HTTP Basic)"},
            },
        }
    }


TEXT = {"type": "string"}


def _text(summary: str, media_type: str) -> dict[str, Any]:
    return {
        "get": {
            "summary": summary,
            "responses": {
                "200": {
                    "description": "OK",
                    "content": {media_type: {"schema": {"type": "string"}}},
                },
                "401": {"description": "Operator credentials needed (HTTP Basic)"},
            },
        }
    }


def openapi() -> dict[str, Any]:
    _, schemas = models_json_schema([(m, "validation") for m in MODELS], ref_template=REF)
    return {
        "openapi": "3.1.0",
        "info": {"title": "drfmesos master", "version": "1"},
        "components": {
            "schemas": schemas.get("$defs", {}),
            "securitySchemes": {"basic": {"type": "http", "scheme": "basic"}},
        },
        "security": [{"basic": []}],
        "paths": {
            "/api/v1/state": _get("The master's books as a snapshot", "State"),
            "/api/v1/frameworks": _get(
                "Every framework, and the last ones removed (completed)", "Frameworks"
            ),
            "/api/v1/slaves": _get(
                "Slaves, a page at a time; by last_heartbeat: the longest unheard first; "
                "search: those whose id or hostname holds it",
                "Slaves",
                [
                    {
                        "name": "sort",
                        "in": "query",
                        "schema": {"enum": [*SLAVE_SORTS, *(f"-{s}" for s in SLAVE_SORTS)]},
                    },
                    {"name": "search", "in": "query", "schema": {"type": "string"}},
                    *_page_params(),
                ],
            ),
            "/api/v1/tasks": _get(
                "Tasks (running, and the recently ended), filtered and paged",
                "Tasks",
                [
                    {"name": "framework", "in": "query", "schema": {"type": "string"}},
                    {"name": "state", "in": "query", "schema": {"type": "string"}},
                    {"name": "search", "in": "query", "schema": {"type": "string"}},
                    {
                        "name": "sort",
                        "in": "query",
                        "schema": {"enum": [*TASK_SORTS, *(f"-{s}" for s in TASK_SORTS)]},
                    },
                    *_page_params(),
                ],
            ),
            "/api/v1/offers": _get(
                "Outstanding offers, a page at a time", "Offers", _page_params()
            ),
            "/api/v1/roles": _get("The role tree: weights, quotas, shares", "Roles"),
            "/api/v1/limits": _get(
                "Rate limits per principal, and the calls they queued, throttled, refused",
                "Limits",
            ),
            "/api/v1/frameworks/{framework}/why": _get(
                "Why a framework (its id, or its name) is offered nothing: its reasons, the "
                "one that explains first, each a code and the numbers behind it; and the "
                "offers it was made lately (a framework principal: its own frameworks only); "
                "a call under the asker's rate limit (429 past its capacity)",
                "Why",
                [
                    {
                        "name": "framework",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    }
                ],
            ),
            "/api/v1/tasks/{framework_id}/{task_id}/files/{name}": _get(
                "A part of a task's stdout or stderr, read from its slave; a call under the "
                f"asker's rate limit (429 past its capacity, or past {FILE_READS_AT_ONCE} reads "
                "at once)",
                "TaskFile",
                [
                    {
                        "name": "framework_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                    {
                        "name": "task_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                    {
                        "name": "name",
                        "in": "path",
                        "required": True,
                        "schema": {"enum": ["stdout", "stderr"]},
                    },
                    {"name": "offset", "in": "query", "schema": {"type": "integer"}},
                    {"name": "length", "in": "query", "schema": {"type": "integer"}},
                ],
            ),
            "/api/v1/events": _get(
                "Recent events, oldest first (the master keeps the last 200)",
                "Events",
                [
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 1000},
                    }
                ],
            ),
            "/api/v1/stream": _text(
                "The live feed: server-sent events, the whole view (`snapshot`) and then "
                "what changed (`changes`), tick by tick",
                "text/event-stream",
            ),
            "/metrics": _text(
                "Prometheus metrics (the text format); may be left open (--http-open-metrics)",
                "text/plain; version=0.0.4",
            ),
            "/health": _get("Liveness", "Health"),
        },
    }
