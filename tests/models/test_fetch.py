"""Fetching weights without network: from a local folder, from a hub cache (huggingface_hub's offline
path, for real), and the clear error when the hub cannot be reached. Nothing here downloads."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from robopin.models import (
    IncompleteModelError,
    ModelFetchError,
    ModelSourceUnreachableError,
    check_model_folder,
    fetch_model,
    load_registry,
)

REGISTRY = load_registry(Path(__file__).resolve().parents[2] / "models" / "registry.yaml")
COMMIT = "4f1c2d3e4b5a69788796a5b4c3d2e1f001122334"


def write_fake_model(folder: Path, *, shards: int = 2) -> dict[str, np.ndarray]:
    """A small model folder shaped like a hub repository: config, sharded safetensors + index, tokenizer."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"architectures": ["Qwen3VLForConditionalGeneration"]}))
    (folder / "tokenizer_config.json").write_text("{}")
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    (folder / "README.md").write_text("model card")
    (folder / "pytorch_model.bin").write_bytes(b"pickled duplicate that must not be copied")
    rng = np.random.default_rng(0)
    tensors: dict[str, np.ndarray] = {}
    weight_map: dict[str, str] = {}
    for index in range(shards):
        shard_name = f"model-{index + 1:05d}-of-{shards:05d}.safetensors"
        shard = {f"layer{index}.weight": rng.standard_normal((16, 8)).astype(np.float32)}
        save_file(shard, str(folder / shard_name))
        tensors.update(shard)
        weight_map.update(dict.fromkeys(shard, shard_name))
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return tensors


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_fetch_from_a_folder_copies_only_what_a_server_needs(tmp_path):
    source = tmp_path / "usb" / "robopin-4b"
    tensors = write_fake_model(source)
    result = fetch_model(REGISTRY["robopin-4b"], tmp_path / "models", source_dir=source)
    target = tmp_path / "models" / "robopin-4b"
    assert result.path == target and not result.already_present
    assert not (target / "pytorch_model.bin").exists()
    assert (target / "chat_template.jinja").read_text() == "{{ messages }}"
    from safetensors.numpy import load_file

    for shard in target.glob("*.safetensors"):
        for key, value in load_file(str(shard)).items():
            np.testing.assert_array_equal(value, tensors[key])
    assert result.files == len(check_model_folder(target))
    assert result.bytes == sum(p.stat().st_size for p in target.iterdir())
    assert not [p for p in (tmp_path / "models").iterdir() if p.name.startswith(".")], "no staging folder left"


def test_a_complete_copy_is_kept_and_force_copies_again(tmp_path):
    source = tmp_path / "src"
    write_fake_model(source)
    spec = REGISTRY["robopin-4b"]
    fetch_model(spec, tmp_path / "models", source_dir=source)
    again = fetch_model(spec, tmp_path / "models", source_dir=source)
    assert again.already_present and again.source == "existing"
    (tmp_path / "models" / "robopin-4b" / "marker.json").write_text("{}")
    forced = fetch_model(spec, tmp_path / "models", source_dir=source, force=True)
    assert not forced.already_present
    assert not (tmp_path / "models" / "robopin-4b" / "marker.json").exists()


def test_a_truncated_shard_is_named(tmp_path):
    source = tmp_path / "src"
    write_fake_model(source)
    shard = source / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-100])
    with pytest.raises(IncompleteModelError, match=r"model-00002-of-00002.safetensors' is truncated"):
        fetch_model(REGISTRY["robopin-4b"], tmp_path / "models", source_dir=source)
    assert not (tmp_path / "models" / "robopin-4b").exists()


def test_a_missing_shard_is_named(tmp_path):
    source = tmp_path / "src"
    write_fake_model(source, shards=3)
    (source / "model-00003-of-00003.safetensors").unlink()
    with pytest.raises(IncompleteModelError, match=r"lacks 1 of the 3 weight shards its index names: model-00003"):
        check_model_folder(source)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda f: (f / "config.json").unlink(), "has no config.json"),
        (lambda f: (f / "config.json").write_text("{not json"), "config.json' is not readable JSON"),
        (lambda f: [p.unlink() for p in f.glob("*.safetensors")], r"has no \*.safetensors weights"),
        (lambda f: (f / "model-00001-of-00002.safetensors").write_bytes(b"\xff" * 64), "not a readable safetensors"),
    ],
)
def test_broken_folders_are_refused(tmp_path, damage, message):
    write_fake_model(tmp_path / "m")
    damage(tmp_path / "m")
    with pytest.raises(IncompleteModelError, match=message):
        check_model_folder(tmp_path / "m")


def test_a_missing_source_folder_is_named(tmp_path):
    with pytest.raises(ModelFetchError, match=r"source folder .*nowhere' for model 'robopin-4b' does not exist"):
        fetch_model(REGISTRY["robopin-4b"], tmp_path / "models", source_dir=tmp_path / "nowhere")


def test_endpoints_have_nothing_to_fetch(tmp_path):
    with pytest.raises(ModelFetchError, match="no weights to fetch"):
        fetch_model(REGISTRY["openai-endpoint"], tmp_path)


def write_hub_cache(cache_dir: Path, hub_id: str, files_from: Path, commit: str = COMMIT) -> Path:
    """The huggingface_hub cache layout (models--owner--name/refs/main -> snapshots/<commit>/...)."""
    repo = cache_dir / f"models--{hub_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for path in files_from.iterdir():
        (snapshot / path.name).write_bytes(path.read_bytes())
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return snapshot


def test_offline_fetch_resolves_the_hub_cache_with_huggingface_hub(tmp_path):
    write_fake_model(tmp_path / "files")
    models = tmp_path / "models"
    snapshot = write_hub_cache(models / ".hf-cache", "QwQ2/RoboPIN-4B", tmp_path / "files")
    result = fetch_model(REGISTRY["robopin-4b"], models, offline=True)
    link = models / "robopin-4b"
    assert link.is_symlink() and not os.path.isabs(os.readlink(link)), "relative, so the folder can be mounted"
    assert link.resolve() == snapshot.resolve()
    assert result.source == "hub QwQ2/RoboPIN-4B@main (cache only)"
    moved = tmp_path / "mounted"
    models.rename(moved)
    check_model_folder(moved / "robopin-4b")


def test_offline_fetch_without_a_cache_says_what_to_do(tmp_path):
    with pytest.raises(ModelSourceUnreachableError) as caught:
        fetch_model(REGISTRY["robopin-4b"], tmp_path / "models", offline=True)
    message = str(caught.value)
    assert "QwQ2/RoboPIN-4B@main" in message and "offline mode is on" in message
    assert "--from" in message and "robopin models fetch robopin-4b" in message


def test_an_unreachable_hub_is_a_clear_error(tmp_path):
    endpoint = f"http://127.0.0.1:{closed_port()}"
    started = time.monotonic()
    with pytest.raises(ModelSourceUnreachableError, match=rf"the hub at {endpoint} cannot be reached"):
        fetch_model(REGISTRY["qwen3-vl-2b-instruct"], tmp_path / "models", endpoint=endpoint)
    assert time.monotonic() - started < 60, "a refused connection must not hang the command"


def test_an_unreachable_hub_falls_back_to_a_complete_cache(tmp_path):
    write_fake_model(tmp_path / "files")
    models = tmp_path / "models"
    write_hub_cache(models / ".hf-cache", "Qwen/Qwen3-VL-2B-Instruct", tmp_path / "files")
    endpoint = f"http://127.0.0.1:{closed_port()}"
    result = fetch_model(REGISTRY["qwen3-vl-2b-instruct"], models, endpoint=endpoint)
    assert result.path.resolve().parent.name == "snapshots"


def test_the_runbook_usb_path_copies_a_hub_snapshot_with_real_files(tmp_path):
    """Fetch on the internet machine (hub cache: snapshot files are links to blobs), copy the models
    folder to a USB disk, then `--from` on the robot PC: the copy holds the files, not dangling links."""
    write_fake_model(tmp_path / "files")
    usb = tmp_path / "usb-models"
    repo = usb / ".hf-cache" / "models--QwQ2--RoboPIN-4B"
    snapshot = repo / "snapshots" / COMMIT
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for index, path in enumerate(sorted((tmp_path / "files").iterdir())):
        blob = repo / "blobs" / f"blob{index}"
        blob.write_bytes(path.read_bytes())
        (snapshot / path.name).symlink_to(os.path.relpath(blob, snapshot))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    fetch_model(REGISTRY["robopin-4b"], usb, offline=True)
    robot_pc = tmp_path / "robot-pc-models"
    result = fetch_model(REGISTRY["robopin-4b"], robot_pc, source_dir=usb / "robopin-4b")
    copied = sorted(result.path.iterdir())
    assert copied and not any(path.is_symlink() for path in copied)
    check_model_folder(result.path)
