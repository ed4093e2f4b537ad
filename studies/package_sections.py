"""The package's sections other apps write (`package_section_register`): judging's
`judges/` folder. A module of its own so an app registers its section at start-up without
loading the package builder and what it imports (the analysis, pandas, scipy)."""

from __future__ import annotations

from typing import Any, Protocol


class PackageSection(Protocol):
    def __call__(self, out: Any) -> None:
        """Write this section's files through `out`, a `studies.package.PackageWriter`
        (not named here: this module must not import the package builder)."""
        ...


package_sections: dict[str, PackageSection] = {}


def package_section_register(folder: str, section: PackageSection) -> None:
    """Install the section that writes the package's `folder/` (registering a folder
    again replaces its section, so a repeated `ready()` does not duplicate it)."""
    package_sections[folder] = section
