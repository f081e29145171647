"""Bring a registered model's weights into a local models folder, and check that a folder is servable.

On a machine with internet, :func:`fetch_model` downloads the entry's hub repository at its revision
with ``huggingface_hub`` into a cache inside the models folder and links ``<models_dir>/<name>`` to
the snapshot. Robot PCs and servers without internet get the folder another way: copy it from a
machine that fetched it, or :func:`fetch_model` with ``source_dir`` (a USB disk, an NFS share).
Either way :func:`check_model_folder` must pass before vLLM is pointed at the folder, so a half copy
fails here with the missing file named instead of minutes later inside the server.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from robopin.models.errors import IncompleteModelError, ModelFetchError, ModelSourceUnreachableError
from robopin.models.registry import ModelSpec

logger = logging.getLogger(__name__)

ALLOW_PATTERNS: tuple[str, ...] = (
    "*.json",
    "*.safetensors",
    "*.txt",
    "*.jinja",
    "*.model",
    "*.tiktoken",
    "*.py",
    "*.md",
)
"""Files a server needs (config, weights, tokenizer, processor, chat template, remote code) and the
model card. Everything else in a repository (pickled ``*.bin`` duplicates, images, training logs)
is left behind."""

HUB_CACHE_FOLDER = ".hf-cache"
INDEX_FILE = "model.safetensors.index.json"


@dataclass(frozen=True)
class FetchResult:
    """Where a fetched model lives and how it got there."""

    name: str
    path: Path
    source: str
    files: int
    bytes: int
    already_present: bool = False


def _selected(relative: str) -> bool:
    return not relative.startswith(".") and any(fnmatch(Path(relative).name, pattern) for pattern in ALLOW_PATTERNS)


def check_safetensors_file(path: str | os.PathLike[str]) -> None:
    """Raise :class:`IncompleteModelError` if a ``.safetensors`` file is truncated or not safetensors.

    Reads only the header (8-byte little-endian length, then JSON with each tensor's byte range), so
    a multi-gigabyte shard is checked in microseconds: an interrupted copy is shorter than the
    largest end offset the header promises.
    """
    file = Path(path)
    size = file.stat().st_size
    try:
        with file.open("rb") as stream:
            header_length = int.from_bytes(stream.read(8), "little")
            if size < 8 or not 2 <= header_length <= size - 8:
                raise ValueError(f"header length {header_length} does not fit a {size}-byte file")
            header = json.loads(stream.read(header_length))
        data_end = max(
            (int(entry["data_offsets"][1]) for key, entry in header.items() if key != "__metadata__"), default=0
        )
    except (OSError, ValueError, KeyError, TypeError, IndexError) as error:
        raise IncompleteModelError(f"{str(file)!r} is not a readable safetensors file: {error}") from error
    expected = 8 + header_length + data_end
    if size < expected:
        raise IncompleteModelError(
            f"{str(file)!r} is truncated: {size} bytes, its header needs {expected} (an interrupted copy?)"
        )


def check_model_folder(path: str | os.PathLike[str]) -> list[str]:
    """Return the files of a servable model folder, or raise :class:`IncompleteModelError` naming what lacks.

    Servable means: ``config.json`` is valid JSON, there is at least one ``*.safetensors`` file, every
    one of them is complete (:func:`check_safetensors_file`), and when ``model.safetensors.index.json``
    exists every shard it maps a tensor to is present.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise IncompleteModelError(f"model folder {str(folder)!r} does not exist")
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and ".cache" not in p.parts)
    if "config.json" not in files:
        raise IncompleteModelError(f"model folder {str(folder)!r} has no config.json (found {len(files)} files)")
    try:
        json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise IncompleteModelError(f"{str(folder / 'config.json')!r} is not readable JSON: {error}") from error
    weights = [f for f in files if f.endswith(".safetensors")]
    if not weights:
        raise IncompleteModelError(f"model folder {str(folder)!r} has no *.safetensors weights")
    for weight_file in weights:
        check_safetensors_file(folder / weight_file)
    if INDEX_FILE in files:
        try:
            weight_map = json.loads((folder / INDEX_FILE).read_text(encoding="utf-8"))["weight_map"]
            shards = sorted(set(weight_map.values()))
        except (OSError, ValueError, KeyError, AttributeError) as error:
            raise IncompleteModelError(f"{str(folder / INDEX_FILE)!r} has no readable weight_map: {error}") from error
        missing = [shard for shard in shards if not (folder / shard).is_file()]
        if missing:
            raise IncompleteModelError(
                f"model folder {str(folder)!r} lacks {len(missing)} of the {len(shards)} weight shards its index "
                f"names: {', '.join(missing[:3])}{' …' if len(missing) > 3 else ''}"
            )
    return files


def _folder_size(files: Sequence[str], folder: Path) -> int:
    return sum((folder / f).stat().st_size for f in files)


def _replace(target: Path, build: Path | str, *, symlink: bool) -> None:
    """Put ``build`` (a folder, or a relative link text) at ``target``, removing what was there."""
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)
    if symlink:
        target.symlink_to(build, target_is_directory=True)
    else:
        os.replace(build, target)


def _copy_from_folder(spec: ModelSpec, source_dir: Path, target: Path) -> None:
    if not source_dir.is_dir():
        raise ModelFetchError(f"source folder {str(source_dir)!r} for model {spec.name!r} does not exist")
    check_model_folder(source_dir)
    staging = Path(tempfile.mkdtemp(prefix=f".{spec.name}.partial-", dir=target.parent))
    try:
        for path in sorted(source_dir.rglob("*")):
            relative = str(path.relative_to(source_dir))
            if not path.is_file() or not _selected(relative):
                continue
            destination = staging / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, destination)
        check_model_folder(staging)
        _replace(target, staging, symlink=False)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _download_from_hub(
    spec: ModelSpec,
    target: Path,
    *,
    cache_dir: Path,
    offline: bool,
    endpoint: str | None,
    token: str | None,
) -> None:
    try:
        import huggingface_hub
        from huggingface_hub import errors as hub_errors
    except ImportError as error:
        raise ModelFetchError(
            "downloading from the hub needs huggingface_hub (pip install huggingface-hub); "
            "or copy the model folder here and pass --from <folder>"
        ) from error
    where = f"{spec.hub_id}@{spec.revision}"
    hint = (
        f"On a machine with internet run `robopin models fetch {spec.name} --models-dir DIR` and copy DIR's "
        f"'{spec.name}' folder here, then `robopin models fetch {spec.name} --from <that folder>`."
    )
    try:
        snapshot = huggingface_hub.snapshot_download(
            spec.hub_id,
            revision=spec.revision,
            cache_dir=cache_dir,
            allow_patterns=list(ALLOW_PATTERNS),
            local_files_only=offline,
            endpoint=endpoint,
            token=token,
        )
    except hub_errors.IncompleteSnapshotError as error:
        raise IncompleteModelError(
            f"the cached copy of {where} in {str(cache_dir)!r} is incomplete: {error}"
        ) from error
    except (hub_errors.GatedRepoError, hub_errors.RepositoryNotFoundError) as error:
        raise ModelFetchError(
            f"the hub refused {where}: the repository does not exist or needs access (accept its license on "
            f"the hub and set HF_TOKEN): {error}"
        ) from error
    except hub_errors.RevisionNotFoundError as error:
        raise ModelFetchError(f"revision {spec.revision!r} of {spec.hub_id} does not exist on the hub") from error
    except (hub_errors.LocalEntryNotFoundError, hub_errors.OfflineModeIsEnabled) as error:
        address = endpoint or "its default address"
        reason = "offline mode is on" if offline else f"the hub at {address} cannot be reached"
        raise ModelSourceUnreachableError(
            f"cannot fetch {where}: {reason} and no complete copy is cached in {str(cache_dir)!r}. {hint}"
        ) from error
    except OSError as error:  # disk full, permissions
        raise ModelFetchError(f"cannot store {where} under {str(cache_dir)!r}: {error}") from error
    # A relative link keeps working when the whole models folder is mounted elsewhere (e.g. /models in a container).
    _replace(target, os.path.relpath(snapshot, target.parent), symlink=True)


def fetch_model(
    spec: ModelSpec,
    models_dir: str | os.PathLike[str],
    *,
    source_dir: str | os.PathLike[str] | None = None,
    offline: bool = False,
    endpoint: str | None = None,
    token: str | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    force: bool = False,
) -> FetchResult:
    """Make ``<models_dir>/<spec.name>`` a complete, servable copy of the model and return where it is.

    ``source_dir``: copy from this folder instead of the hub. ``offline``: use only the hub cache
    (``cache_dir``, default ``<models_dir>/.hf-cache``). ``endpoint``: a hub mirror. A folder that is
    already complete is kept unless ``force``.
    """
    if spec.kind != "hub":
        raise ModelFetchError(
            f"model {spec.name!r} is an OpenAI-compatible endpoint ({spec.base_url}); it has no weights to fetch"
        )
    models_path = Path(models_dir)
    try:
        models_path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ModelFetchError(f"cannot create models folder {str(models_path)!r}: {error}") from error
    target = models_path / spec.name
    if not force and target.exists():
        try:
            files = check_model_folder(target)
        except IncompleteModelError as error:
            logger.info("re-fetching %s: %s", spec.name, error)
        else:
            return FetchResult(spec.name, target, "existing", len(files), _folder_size(files, target), True)
    if source_dir is not None:
        source = f"folder {Path(source_dir)}"
        _copy_from_folder(spec, Path(source_dir), target)
    else:
        cache = Path(cache_dir) if cache_dir is not None else models_path / HUB_CACHE_FOLDER
        source = f"hub {spec.hub_id}@{spec.revision}" + (" (cache only)" if offline else "")
        _download_from_hub(spec, target, cache_dir=cache, offline=offline, endpoint=endpoint, token=token)
    files = check_model_folder(target)
    result = FetchResult(spec.name, target, source, len(files), _folder_size(files, target))
    logger.info(
        "%s ready in %s from %s (%d files, %.2f GB)", spec.name, target, source, result.files, result.bytes / 1e9
    )
    return result
