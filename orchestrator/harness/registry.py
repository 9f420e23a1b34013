"""The tool registry: one name, one spec; the risk-class contract is checked here."""

from __future__ import annotations

from collections.abc import Iterator

from orchestrator.harness.spec import Risk, ToolSpec


class RegistryError(ValueError):
    """A spec breaks the registry's rules (duplicate name, missing contract)."""


class Registry:
    def __init__(self, specs: list[ToolSpec] | None = None) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs or []:
            self.register(spec)

    def register(self, spec: ToolSpec) -> ToolSpec:
        if spec.name in self._specs:
            raise RegistryError(f"tool {spec.name!r} is already registered")
        _check_contract(spec)
        self._specs[spec.name] = spec
        return spec

    def check_compensations(self) -> None:
        """Every compensation a high-risk tool names is a registered write tool (the harness asks)."""
        for spec in self._specs.values():
            undo = spec.compensation
            if not isinstance(undo, str):
                continue
            target = self._specs.get(undo)
            if target is None or target.risk in (Risk.READ_ONLY, Risk.DENY):
                raise RegistryError(
                    f"tool {spec.name!r} names compensation {undo!r}, which is no registered write tool"
                )

    def get(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return sorted(self._specs)

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._specs[name] for name in self.names())

    def __len__(self) -> int:
        return len(self._specs)


def _check_contract(spec: ToolSpec) -> None:
    if spec.risk is Risk.DENY:
        return
    if spec.executor is None:
        raise RegistryError(f"tool {spec.name!r} has no executor")
    if spec.risk in (Risk.REVERSIBLE_WRITE, Risk.HIGH_RISK) and spec.key is None:
        raise RegistryError(f"{spec.risk} tool {spec.name!r} must declare how its business key is derived")
    if spec.risk is Risk.HIGH_RISK:
        if spec.status_probe is None:
            raise RegistryError(f"high-risk tool {spec.name!r} must declare a status probe or NO_PROBE")
        if spec.approval_scope is None:
            raise RegistryError(f"high-risk tool {spec.name!r} must declare what its approval covers")
        if spec.compensation is None:
            raise RegistryError(f"high-risk tool {spec.name!r} must declare a compensation or IRREVERSIBLE")


__all__ = ["Registry", "RegistryError"]
