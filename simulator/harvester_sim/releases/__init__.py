"""Simulated Harvester releases: catalog, real ISO 9660 images, and the release HTTP server.

* :mod:`.catalog`: :class:`Release` (component versions, image lists), the built-in
  catalog, scenario-declared releases (:class:`ReleaseSet`).
* :mod:`.iso`: :func:`build_iso` (pycdlib, deterministic, cached), :class:`IsoReader`,
  :func:`sha512`, :func:`iso_http_handler` for the simulated nginx repo server.
* :mod:`.server`: :class:`ReleaseServer`, loopback HTTP serving ISOs and checksums with
  faults (slow, corrupt, 404, cut) and a download-time model.
"""

from .catalog import (
    CATALOG,
    Image,
    Release,
    ReleaseSet,
    archived_versions,
    get_release,
    images_diff,
    known_versions,
    parse_version,
    previous_version,
    release_from_dict,
    synthesize_release,
    version_key,
)
from .iso import (
    IsoReader,
    build_iso,
    checksum_file,
    iso_files,
    iso_http_handler,
    reader_for,
    sha512,
)
from .server import FAULT_KINDS, Fault, ReleaseServer, RequestRecord, download_seconds

__all__ = [
    "CATALOG", "FAULT_KINDS", "Fault", "Image", "IsoReader", "Release", "ReleaseServer",
    "ReleaseSet", "RequestRecord", "archived_versions", "build_iso", "checksum_file",
    "download_seconds", "get_release", "images_diff", "iso_files", "iso_http_handler",
    "known_versions", "parse_version", "previous_version", "reader_for", "release_from_dict",
    "sha512", "synthesize_release", "version_key",
]
