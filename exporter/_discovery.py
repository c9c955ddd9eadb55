"""Which projects a run covers: organizations, shared projects, paging, explicit scoping.

`GET /projects` pages 10 at a time by default, so we always page with limit 100 (the smaller of
the two documented maxima, PRODUCT.md) until a short or empty page. A personal key must name an
organization (400 "org_id is required"), so its organizations are listed first; an organization
key implies its org; a project-scoped key may not list at all, which is why `--project` works
without any listing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from exporter._client import ApiClient
from exporter._errors import ApiError, AuthError, ScopeError
from exporter._paging import Pager

log = logging.getLogger("opsaudit.discovery")

PROJECTS_PAGE = 100
UNLISTED = "_opsaudit_unlisted"  # marks a project known by id only: no snapshot to store


ALL = "*"  # the scope of a listing without org_id (an organization key's projects)
SHARED = "shared"  # the scope of `GET /projects/shared`


@dataclass
class Discovery:
    """The projects in scope and how far the listing can be trusted."""

    projects: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> listing object
    scope_of: dict[str, str] = field(default_factory=dict)  # id -> scope that listed it
    # The listing covered the whole scope: projects missing from it may be marked deleted.
    complete: bool = True
    # The scopes (org ids, ALL, SHARED) listed in full: deletion marking stays within them.
    scopes_listed: list[str] = field(default_factory=list)
    explicit: bool = False  # scope given by --project: no listing at all
    unavailable: list[str] = field(default_factory=list)
    # Listings that failed and left projects out: the run cannot be complete (exit 1).
    errors: list[str] = field(default_factory=list)

    def add(self, projects: list[dict[str, Any]], scope: str) -> None:
        for p in projects:
            if p["id"] not in self.projects:
                self.projects[p["id"]] = p
                self.scope_of[p["id"]] = scope
        self.scopes_listed.append(scope)

    @property
    def complete_scopes(self) -> list[str]:
        return [] if self.explicit or not self.complete else list(self.scopes_listed)


def _page_projects(
    client: ApiClient, *, org_id: str | None, shared: bool = False, found: Discovery | None = None
) -> list[dict[str, Any]]:
    def fetch(cursor: str | None) -> tuple[list[Any], int, str | None]:
        if shared:
            body = client.list_shared_projects(limit=PROJECTS_PAGE, cursor=cursor)
        else:
            body = client.list_projects(limit=PROJECTS_PAGE, cursor=cursor, org_id=org_id)
        page = body.get("projects")
        if not isinstance(page, list):
            raise ApiError("malformed project listing: 'projects' is not a list")
        unavailable = body.get("unavailable_project_ids")
        if found is not None and isinstance(unavailable, list) and unavailable:
            # A partial listing (PRODUCT.md): sync those projects by id, and do not take their
            # absence from this page as deletion.
            found.complete = False
            found.unavailable.extend(str(u) for u in unavailable)
        pagination = body.get("pagination")
        next_cursor = pagination.get("cursor") if isinstance(pagination, dict) else None
        return page, len(page), next_cursor if isinstance(next_cursor, str) else None

    out: list[dict[str, Any]] = []
    pager = Pager(fetch, PROJECTS_PAGE, what="GET /projects")
    while (page := pager.next()) is not None:
        for project in page.items:
            if isinstance(project, dict) and isinstance(project.get("id"), str):
                if org_id is not None and "org_id" not in project:
                    project = {**project, "org_id": org_id}
                out.append(project)
    return out


def discover(
    client: ApiClient, *, project_ids: list[str] | None = None, org_ids: list[str] | None = None
) -> Discovery:
    """List the projects in scope (see the module docstring for the rules)."""
    found = Discovery()
    if project_ids:
        found.explicit = True
        found.complete = False
        for pid in project_ids:
            found.projects[pid] = {"id": pid, UNLISTED: True}
        return found
    orgs: list[str]
    if org_ids:
        orgs = list(org_ids)
    else:
        try:
            orgs = [o["id"] for o in client.list_organizations() if isinstance(o, dict)]
        except AuthError:
            raise
        except ApiError as exc:
            # Organization and project-scoped keys cannot list the user's organizations.
            log.info("no organization listing for this key (%s); listing its projects", exc)
            orgs = []
    if not orgs:
        try:
            found.add(_page_projects(client, org_id=None, found=found), ALL)
        except ScopeError as exc:
            raise ApiError(
                f"the key needs an organization to list projects ({exc}); pass --org-id"
            ) from exc
        _add_unavailable(found)
        return found
    for org in orgs:
        found.add(_page_projects(client, org_id=org, found=found), org)
    if not org_ids:
        # Projects other users shared with this user belong to no org it lists. A failure
        # here leaves projects unsynced: the run is partial, never silently complete.
        try:
            found.add(_page_projects(client, org_id=None, shared=True, found=found), SHARED)
        except AuthError:
            raise
        except ApiError as exc:
            log.warning("listing shared projects failed: %s", exc)
            found.errors.append(f"listing shared projects failed: {exc}")
    _add_unavailable(found)
    return found


def _add_unavailable(found: Discovery) -> None:
    for pid in found.unavailable:
        found.projects.setdefault(pid, {"id": pid, UNLISTED: True})
