"""Every URL route of the site, read from the URL resolver (never listed by hand), and the
way to fill in its path parameters from the seeded world."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from django.urls import URLPattern, URLResolver, get_resolver, reverse


@dataclass(frozen=True)
class Route:
    name: str  # namespaced, e.g. "memory:detail"
    pattern: str
    parameters: tuple[str, ...]

    def url(self, values: dict[str, str]) -> str:
        return reverse(self.name, kwargs={p: values[p] for p in self.parameters})


def _walk(
    resolver: URLResolver, prefix: str = "", namespace: str = ""
) -> Iterator[tuple[str, str, URLPattern]]:
    """(full pattern, namespaced name or "", pattern) for every leaf of the resolver."""
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            inner = namespace
            if entry.namespace:
                inner = f"{namespace}:{entry.namespace}" if namespace else entry.namespace
            yield from _walk(entry, prefix + str(entry.pattern), inner)
        else:
            name = entry.name or ""
            if name and namespace:
                name = f"{namespace}:{name}"
            yield prefix + str(entry.pattern), name, entry


def all_routes() -> list[Route]:
    """One Route per named URL pattern (the first pattern of a name wins, as `reverse`
    picks it). Unnamed patterns cannot be reversed and are reported by the caller."""
    routes: dict[str, Route] = {}
    for pattern, name, entry in _walk(get_resolver()):
        if not name or name in routes:
            continue
        routes[name] = Route(name, pattern, tuple(entry.pattern.regex.groupindex))
    return sorted(routes.values(), key=lambda r: r.name)


def unnamed_patterns() -> list[str]:
    return [pattern for pattern, name, _ in _walk(get_resolver()) if not name]
