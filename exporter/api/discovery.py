"""Which projects a run covers: organizations, shared projects, paging, explicit scoping.

`GET /projects` pages 10 at a time by default, so we always page, with the largest `limit` the
API accepts: 400 per its OpenAPI document; where it answers 400 Bad Request to that, once, we fall
back to 100 (the pagination guide's maximum, PRODUCT.md) and the caller remembers it. 10,000
projects list in 25 requests, not 100. A page of exactly 100 with a cursor is followed
(`PROJECTS_SHORT_PAGES`: a server paging at the guide's maximum below the limit asked). A personal key must name an organization (400 "org_id is
required"), so its organizations are listed first, then the projects others shared with the
user (`GET /projects/shared`; a personal key in no organization lists its own projects without
`org_id`, then those); an organization key implies its org; a project-scoped key may not list at
all, which is why `--project` works without any listing (with `--org-id` too, the run covers
both: the projects named and the organizations' projects). A listing that fails leaves its
projects unsynced: the run is partial (exit 1), unless every organization's failed.

Listing pages are handed to `on_page` as they arrive (the sync records them in the state), so
memory holds ids, not ten thousand listing objects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from exporter.api.client import ApiClient
from exporter.api.paging import Pager
from exporter.core.errors import ApiError, AuthError, ScopeError

log = logging.getLogger("opsaudit.discovery")

PROJECTS_PAGE = 400  # the OpenAPI document's maximum
PROJECTS_PAGE_FALLBACK = 100  # the pagination guide's maximum
# The size a server may page the listing at below the `limit` asked (PRODUCT.md: the docs
# disagree, 400 or 100): such a page with a cursor is not taken for the last. Taken for it, a
# server capping at 100 had the rest never synced, and after a complete listing marked deleted;
# the cost is one request, for an organization whose last page holds exactly 100. Not the
# default page (10): it is what a request without `limit` gets, and every request sends one
# (following it cost an organization of exactly 10 projects a request in every run: 14 for 13).
PROJECTS_SHORT_PAGES = (PROJECTS_PAGE_FALLBACK,)
ALL = "*"  # the scope of a listing without org_id (an organization key's projects)
SHARED = "shared"  # the scope of `GET /projects/shared`

# Listing objects of one page and the scope they were listed in.
OnPage = Callable[[list[dict[str, Any]], str], None]


@dataclass
class Discovery:
    """The projects in scope and how far the listing can be trusted."""

    scope_of: dict[str, str | None] = field(default_factory=dict)  # id -> scope (None: by id)
    # The listing covered the whole scope: projects missing from it may be marked deleted.
    complete: bool = True
    # The scopes (org ids, ALL, SHARED) listed in full: deletion marking stays within them.
    scopes_listed: list[str] = field(default_factory=list)
    explicit: bool = False  # scope given by --project: no listing at all
    # Every listing of what the key sees ran in full (no --org-id, none failed or partial): a
    # project none of them showed is not the key's.
    whole_account: bool = False
    unavailable: list[str] = field(default_factory=list)
    # Listings that failed and left projects out: the run cannot be complete (exit 1).
    errors: list[str] = field(default_factory=list)
    page_limit: int = PROJECTS_PAGE  # the `limit` the projects listing accepted
    listing_requests: int = 0

    @property
    def ids(self) -> list[str]:
        return sorted(self.scope_of)

    @property
    def complete_scopes(self) -> list[str]:
        return [] if self.explicit or not self.complete else list(self.scopes_listed)


class _Lister:
    """Pages one listing after another, handing each page on; learns the accepted limit."""

    def __init__(self, client: ApiClient, found: Discovery, on_page: OnPage):
        self.client = client
        self.found = found
        self.on_page = on_page

    def list(self, *, org_id: str | None, scope: str, shared: bool = False) -> None:
        try:
            self._list(org_id=org_id, scope=scope, shared=shared)
        except ApiError as exc:
            if not _refuses_limit(exc, self.found.page_limit):
                raise
            # The API refuses 400 per page: 100 it is, for this run and (remembered) later.
            log.info("the projects listing refuses limit=%d; using 100", self.found.page_limit)
            self.found.page_limit = PROJECTS_PAGE_FALLBACK
            self._list(org_id=org_id, scope=scope, shared=shared)
        self.found.scopes_listed.append(scope)

    def _list(self, *, org_id: str | None, scope: str, shared: bool) -> None:
        found, client, limit = self.found, self.client, self.found.page_limit

        def fetch(cursor: str | None) -> tuple[list[Any], int, str | None]:
            found.listing_requests += 1
            if shared:
                body = client.list_shared_projects(limit=limit, cursor=cursor)
            else:
                body = client.list_projects(limit=limit, cursor=cursor, org_id=org_id)
            page = body.get("projects")
            if not isinstance(page, list):
                raise ApiError("malformed project listing: 'projects' is not a list")
            unavailable = body.get("unavailable_project_ids")
            if isinstance(unavailable, list) and unavailable:
                # A partial listing (PRODUCT.md): sync those projects by id, and do not take
                # their absence from this page as deletion.
                found.complete = False
                found.unavailable.extend(str(u) for u in unavailable)
            pagination = body.get("pagination")
            next_cursor = pagination.get("cursor") if isinstance(pagination, dict) else None
            return page, len(page), next_cursor if isinstance(next_cursor, str) else None

        pager = Pager(
            fetch, limit, what="GET /projects", ids=_project_ids, short_pages=PROJECTS_SHORT_PAGES
        )
        while (page := pager.next()) is not None:
            projects = []
            for project in page.items:
                if not (isinstance(project, dict) and isinstance(project.get("id"), str)):
                    continue
                if project["id"] in found.scope_of:
                    continue  # listed already (an org's project also shared with the user)
                if org_id is not None and "org_id" not in project:
                    project = {**project, "org_id": org_id}
                found.scope_of[project["id"]] = scope
                projects.append(project)
            if projects:
                self.on_page(projects, scope)


def _project_ids(page: list[Any]) -> list[str]:
    """The ids of a listing page (the pager tells a page served again by them)."""
    return [p["id"] for p in page if isinstance(p, dict) and isinstance(p.get("id"), str)]


def _refuses_limit(exc: ApiError, limit: int) -> bool:
    """A 400 to the first page at limit 400 (not the org_id one): the API's maximum is 100."""
    return exc.status == 400 and limit > PROJECTS_PAGE_FALLBACK and not isinstance(exc, ScopeError)


def discover(
    client: ApiClient,
    *,
    project_ids: list[str] | None = None,
    org_ids: list[str] | None = None,
    on_page: OnPage | None = None,
    page_limit: int = PROJECTS_PAGE,
) -> Discovery:
    """List the projects in scope (see the module docstring for the rules)."""
    found = Discovery(page_limit=page_limit)
    if project_ids and not org_ids:
        found.explicit = True
        found.complete = False
        for pid in project_ids:
            found.scope_of[pid] = None
        return found
    lister = _Lister(client, found, on_page or (lambda projects, scope: None))
    orgs: list[str]
    listed_orgs = False  # the key's organizations were listed (a personal key)
    if org_ids:
        orgs = list(org_ids)
    else:
        try:
            orgs = [o["id"] for o in client.list_organizations() if isinstance(o, dict)]
            found.listing_requests += 1
            listed_orgs = True
        except AuthError:
            raise
        except ApiError as exc:
            # Organization and project-scoped keys cannot list the user's organizations: a 4xx
            # answer. A network that is down or a failing server (no status, 5xx) is no reason
            # to list differently: that error ends discovery (issue 19).
            if exc.status is None or not 400 <= exc.status < 500:
                raise
            log.info("no organization listing for this key (%s); listing its projects", exc)
            orgs = []
    if orgs:
        _list_organizations(lister, found, orgs, named=bool(project_ids))
        if not org_ids:
            _list_shared(lister, found)
    else:
        try:
            lister.list(org_id=None, scope=ALL)
        except ScopeError as exc:
            raise ApiError(
                f"the key needs an organization to list projects ({exc}); pass --org-id"
            ) from exc
        if listed_orgs:  # a personal key in no organization: others may share projects with it
            _list_shared(lister, found)
    found.whole_account = not org_ids and found.complete and not found.errors
    _add_unavailable(found)
    # Named beside organizations: the run covers both, the projects named and the
    # organizations' (it took the ids alone, and left the organizations out, with exit 0).
    for pid in project_ids or ():
        found.scope_of.setdefault(pid, None)
    return found


def _list_organizations(
    lister: _Lister, found: Discovery, orgs: list[str], named: bool = False
) -> None:
    """Each organization's projects. One whose listing fails leaves its projects unsynced, the
    others synced: the run is partial, never silently complete. Every one failing is discovery
    failing (an API that is down), unless projects are `named` beside them: those are synced,
    the run partial (a mistyped --org-id beside --project synced nothing, exit 5)."""
    failed: list[ApiError] = []
    for org in orgs:
        try:
            lister.list(org_id=org, scope=org)
        except AuthError:
            raise
        except ApiError as exc:
            log.warning("listing the projects of organization %s failed: %s", org, exc)
            found.errors.append(f"listing the projects of organization {org} failed: {exc}")
            failed.append(exc)
    if failed and len(failed) == len(orgs) and not named:
        raise failed[0]


def _list_shared(lister: _Lister, found: Discovery) -> None:
    """Projects other users shared with this user belong to no org it lists. A failure here
    leaves projects unsynced: the run is partial, never silently complete."""
    try:
        lister.list(org_id=None, scope=SHARED, shared=True)
    except AuthError:
        raise
    except ApiError as exc:
        log.warning("listing shared projects failed: %s", exc)
        found.errors.append(f"listing shared projects failed: {exc}")


def _add_unavailable(found: Discovery) -> None:
    for pid in found.unavailable:
        found.scope_of.setdefault(pid, None)
