"""The management API's routes: auth, scopes, listings, operation pages, JSON errors.

Choices where the real API is silent (documented here, pinned by tests/simulator):
- `GET /users/me/organizations` and `GET /projects/shared` with an organization or
  project-scoped key: 403 (they are about a user; such keys have none).
- A project outside the key's scope answers 404, like an unknown one (no existence leak).
- `GET /projects?org_id=X` where the key may not see org X: 403.
- Project listing order: by project id; `cursor` = the last id, the next page starts strictly
  after it (so a cursor naming a deleted project still works); SimConfig.projects_page caps a
  page below the `limit` asked.
- `GET /projects` with a project-scoped key lists just its project.
- An operations cursor excludes the operation it names; SimConfig.inclusive_cursor includes it.
- Branches listing: by id; `limit` 1..10000, and the server pages at
  `SimConfig.branches_page` whatever the limit (PRODUCT.md: it may page even without one); a
  page with more after it carries `pagination.next` (opaque), sent back as `cursor`.
- Endpoints listing: one page, in creation order.
- An operations page past the end: `{"operations": [], "pagination": {"cursor": <sent>}}` or
  `{"operations": []}` (SimConfig.past_end); an empty first page is `{"operations": []}`.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from urllib.parse import parse_qs

import orjson

from exporter.simulator._model import ProjectData
from exporter.simulator._names import decode_cursor, encode_cursor
from exporter.simulator._timefmt import fmt_cursor, parse_cursor_ns
from exporter.simulator._world import Key, World

PREFIX = "/api/v2"
ORG_REQUIRED = "org_id is required, you can find it on your organization settings page"


@dataclass
class Reply:
    """A response before it hits the socket; `route` is the template counted in the stats."""

    status: int
    body: bytes
    route: str
    retry_after: int | None = None


class ApiError(Exception):
    """Turned into a JSON error body `{"code", "message", "request_id"}` by the server."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def route_of(path: str) -> str:
    """The route template of a path (rate limits and stats are per template)."""
    parts = path[len(PREFIX) :].strip("/").split("/") if path.startswith(PREFIX) else []
    if parts == ["projects"]:
        return "GET /projects"
    if parts == ["projects", "shared"]:
        return "GET /projects/shared"
    if parts == ["users", "me", "organizations"]:
        return "GET /users/me/organizations"
    if len(parts) == 2 and parts[0] == "projects":
        return "GET /projects/{project_id}"
    if len(parts) == 3 and parts[0] == "projects" and parts[2] == "operations":
        return "GET /projects/{project_id}/operations"
    if len(parts) == 3 and parts[0] == "projects" and parts[2] in ("branches", "endpoints"):
        return f"GET /projects/{{project_id}}/{parts[2]}"
    if len(parts) == 4 and parts[0] == "projects" and parts[2] == "operations":
        return "GET /projects/{project_id}/operations/{operation_id}"
    return "unknown"


def _int_param(
    q: dict[str, list[str]], name: str, lo: int, hi: int, default: int | None
) -> int | None:
    values = q.get(name)
    if not values:
        return default
    try:
        value = int(values[-1])
    except ValueError:
        raise ApiError(400, f"invalid {name}: must be an integer") from None
    if not lo <= value <= hi:
        raise ApiError(400, f"invalid {name}: must be between {lo} and {hi}")
    return value


def _one(q: dict[str, list[str]], name: str) -> str | None:
    values = q.get(name)
    return values[-1] if values else None


class Api:
    """Answers one authenticated request from the world's state."""

    def __init__(self, world: World) -> None:
        self.world = world

    def handle(self, path: str, query: str, key: Key, route: str) -> Reply:
        w = self.world
        q = parse_qs(query, keep_blank_values=True)
        parts = path[len(PREFIX) :].strip("/").split("/")
        with w.lock:
            if route == "GET /projects":
                return Reply(200, self._projects(q, key), route)
            if route == "GET /projects/shared":
                if key.kind != "personal":
                    raise ApiError(403, "shared projects are listed for personal API keys only")
                return Reply(200, self._page_projects(q, w.listing(None, shared=True)), route)
            if route == "GET /users/me/organizations":
                if key.kind != "personal":
                    raise ApiError(403, "this endpoint requires a personal API key")
                return Reply(200, orjson.dumps({"organizations": w.orgs}), route)
            p = self._project(parts[1], key)
            if route == "GET /projects/{project_id}":
                return Reply(200, b'{"project":' + p.rendered_meta + b"}", route)
            if route == "GET /projects/{project_id}/operations":
                return Reply(200, self._operations(q, p), route)
            if route == "GET /projects/{project_id}/branches":
                return Reply(200, self._branches(q, p), route)
            if route == "GET /projects/{project_id}/endpoints":
                return Reply(200, orjson.dumps({"endpoints": w.endpoints(p)}), route)
            if route == "GET /projects/{project_id}/operations/{operation_id}":
                code = w.op_index.get(parts[3])
                if code is None or code >> 32 != p.index:
                    raise ApiError(404, f"operation {parts[3]} not found")
                body = p.render(code & 0xFFFFFFFF, w.actions, w.statuses)
                return Reply(200, b'{"operation":' + body + b"}", route)
        raise ApiError(404, f"no route for GET {path}")

    def _project(self, project_id: str, key: Key) -> ProjectData:
        w = self.world
        p = w.live_project(project_id)
        visible = p is not None and (
            (key.kind == "personal" and (p.shared or p.org_id in {o["id"] for o in w.orgs}))
            or (key.kind == "org" and p.org_id == key.scope and not p.shared)
            or (key.kind == "project" and p.id == key.scope)
        )
        if not visible or p is None:
            raise ApiError(404, f"project {project_id} not found")
        return p

    def _projects(self, q: dict[str, list[str]], key: Key) -> bytes:
        w = self.world
        org_id = _one(q, "org_id")
        member = [o["id"] for o in w.orgs]
        if key.kind == "personal":
            if org_id is None:
                if member:
                    raise ApiError(400, ORG_REQUIRED)
                ids: list[str] = []
            elif org_id not in member:
                raise ApiError(403, f"you are not a member of organization {org_id}")
            else:
                ids = w.listing(org_id)
        elif key.kind == "org":
            if org_id is not None and org_id != key.scope:
                raise ApiError(403, f"this API key cannot access organization {org_id}")
            ids = w.listing(key.scope)
        else:
            p = w.live_project(key.scope or "")
            if p is not None and org_id is not None and org_id != p.org_id:
                raise ApiError(403, f"this API key cannot access organization {org_id}")
            ids = [] if p is None else [p.id]
        if "timeout" in q:
            _int_param(q, "timeout", 1, 10**9, None)  # accepted; every project loads in time
        return self._page_projects(q, ids)

    def _page_projects(self, q: dict[str, list[str]], ids: list[str]) -> bytes:
        limit = _int_param(q, "limit", 1, self.world.config.projects_max_limit, 10)
        assert limit is not None
        limit = min(limit, self.world.config.projects_page or limit)
        cursor = _one(q, "cursor")
        start = 0 if not cursor else bisect_right(ids, cursor)
        page = ids[start : start + limit]
        if not page:
            # The OpenAPI document requires both maps on every answer (issue 19: an org with no
            # projects, or the page past the end, had none); no pagination (PRODUCT.md).
            return b'{"projects":[],"applications":{},"integrations":{}}'
        by_id = self.world.by_id
        return b"".join(
            [
                b'{"projects":[',
                b",".join(by_id[pid].rendered_meta for pid in page),
                b'],"pagination":{"cursor":',
                orjson.dumps(page[-1]),
                b'},"applications":{},"integrations":{}}',
            ]
        )

    def _branches(self, q: dict[str, list[str]], p: ProjectData) -> bytes:
        limit = _int_param(q, "limit", 1, 10_000, None)
        size = min(limit or self.world.config.branches_page, self.world.config.branches_page)
        cursor = _one(q, "cursor")
        listed = self.world.branches(p)
        start = 0
        if cursor:
            try:
                after = decode_cursor(cursor)
            except ValueError:
                raise ApiError(400, f"invalid cursor {cursor!r}") from None
            start = bisect_right([b["id"] for b in listed], after)
        page = listed[start : start + size]
        body: dict[str, object] = {"branches": page, "annotations": {}}
        if start + size < len(listed):
            body["pagination"] = {
                "next": encode_cursor(page[-1]["id"]),
                "sort_by": "id",
                "sort_order": "ASC",
            }
        return orjson.dumps(body)

    def _operations(self, q: dict[str, list[str]], p: ProjectData) -> bytes:
        w = self.world
        limit = _int_param(q, "limit", 1, 1000, None)  # absent: everything (PRODUCT.md)
        cursor = _one(q, "cursor")
        before_us: int | None = None
        if cursor is not None:
            try:
                ns = parse_cursor_ns(cursor)
            except ValueError:
                raise ApiError(
                    400, f"invalid cursor {cursor!r}: expected an RFC 3339 timestamp"
                ) from None
            before_us = -(-ns // 1000)  # op at us is strictly older iff us*1000 < ns
            if w.config.inclusive_cursor:
                before_us = ns // 1000 + 1  # ... or at the cursor: us*1000 <= ns
        chunk, last_us = p.page(limit, before_us, w.actions, w.statuses)
        if not chunk:
            if cursor is not None and w.config.past_end == "empty_with_pagination":
                return b'{"operations":[],"pagination":{"cursor":' + orjson.dumps(cursor) + b"}}"
            return b'{"operations":[]}'
        assert last_us is not None
        return b"".join(
            [
                b'{"operations":[',
                b",".join(chunk),
                b'],"pagination":{"cursor":"',
                fmt_cursor(last_us).encode(),
                b'"}}',
            ]
        )
