"""axe-core in a Playwright page: the WCAG 2.1 A and AA rules, run where the test points.

axe-core is the npm package pinned in tests/package.json (installed by `scripts/setup.sh --dev`,
`npm ci`); its script is injected into the page as text, so nothing is fetched. Only the rules
tagged WCAG 2.0/2.1 A and AA run (not axe's "best practice" ones), and a finding is returned as
one readable line per element, so a failing assertion says what to fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

AXE = Path(__file__).resolve().parents[1] / "node_modules" / "axe-core" / "axe.min.js"
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]

_RUN = """async ([include, tags]) => {
  const context = include ? { include: [include] } : document;
  const result = await axe.run(context, { runOnly: { type: "tag", values: tags } });
  return result.violations.flatMap((v) =>
    v.nodes.map((n) => `${v.id} (${v.impact}): ${n.target.join(" ")}: ${n.failureSummary}`),
  );
}"""


def violations(page: Any, include: str | None = None) -> list[str]:
    """axe's WCAG 2.1 A/AA violations in `page` (within the elements `include` selects)."""
    if not AXE.exists():
        pytest.fail(
            f"{AXE} is missing: run scripts/setup.sh --dev (npm ci in tests/); the "
            "accessibility checks need axe-core and never download it",
            pytrace=False,
        )
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.add_script_tag(content=AXE.read_text(encoding="utf-8"))
    found: list[str] = page.evaluate(_RUN, [include, TAGS])
    return found
