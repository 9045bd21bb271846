"""Hub publishing (``push_to_hub=<owner>/<name>``, ``python -m sts_lightning.runs.hub_push``) up to the network boundary.

``huggingface_hub.HfApi``'s ``whoami`` / ``create_repo`` / ``upload_folder`` are replaced by recorders: the
tests check what the upload would receive (the export folder with its card and manifest) and that every
failure that can be known in advance (offline, no token, bad repo id, damaged export) is one line raised
before anything is trained or sent.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import huggingface_hub
import huggingface_hub.constants
import pytest

import sts_lightning.embeddings.io.export_manifest as export_manifest
from sts_lightning.embeddings.errors import ConfigError, DataError
from sts_lightning.runs import hub_push
from tests.helpers import compose_train_config

WHOAMI = {"name": "alice", "orgs": [{"name": "sts-lab"}], "auth": {"accessToken": {"role": "write"}}}


@pytest.fixture()
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture()
def hub(monkeypatch):
    """An online hub with a write token, its three calls recorded in order (``calls``)."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")
    calls: list[tuple[str, dict]] = []

    def whoami(self, token=None, **kwargs):
        calls.append(("whoami", {"token": token}))
        return WHOAMI

    def create_repo(self, repo_id, **kwargs):
        calls.append(("create_repo", {"repo_id": repo_id, **kwargs}))
        return f"https://huggingface.co/{repo_id}"

    def upload_folder(self, **kwargs):
        folder = Path(kwargs["folder_path"])  # what would be sent, read while the call happens
        files = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
        calls.append(("upload_folder", {**kwargs, "files": files}))

    monkeypatch.setattr(huggingface_hub.HfApi, "whoami", whoami)
    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", create_repo)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", upload_folder)
    return calls


@pytest.fixture()
def card_in_every_export(monkeypatch):
    """Give an export a README.md model card when the exporter does not write one (yet).

    Why: the model card is added to every export by ``embeddings/io/model_card`` (another change); until it
    lands, this writes a stand-in card inside ``export_directory``'s temporary folder, just before the
    manifest, so the manifest lists it exactly as it will list the real card.
    """
    original = export_manifest.write_manifest

    def write_manifest(folder):
        card = Path(folder) / hub_push.CARD_FILE
        if not card.exists():
            card.write_text("---\nlibrary_name: sentence-transformers\n---\n# stand-in model card\n")
        return original(folder)

    monkeypatch.setattr(export_manifest, "write_manifest", write_manifest)


def _export(tmp_path: Path, card: bool = True, manifest: bool = True) -> Path:
    """A small export directory: weights, config, card, manifest."""
    folder = tmp_path / "run" / "export"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 8)
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    if card:
        (folder / "README.md").write_text("# a model card\n")
    if manifest:
        export_manifest.write_manifest(folder)
    return folder


def _flip_one_bit(path: Path, offset: int = 100) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _error_line(capsys, argv: list[str]) -> str:
    """Run the CLI, expect exit code 2 and exactly one line on stderr."""
    with pytest.raises(SystemExit) as exit_info:
        hub_push.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err.strip()


# ----------------------------------------------------------------------------------- train(): before training


def test_offline_train_fails_with_one_line_before_anything_is_built(offline, monkeypatch, tmp_path,
                                                                     tiny_model_dir, train_data_dir):
    from sts_lightning.runs import train_run

    def must_not_build(*args, **kwargs):
        raise AssertionError("train() built data / model / trainer before the hub check")

    monkeypatch.setattr(train_run, "_build", must_not_build)
    run = tmp_path / "run"
    cfg = compose_train_config(run, tiny_model_dir, train_data_dir, ["push_to_hub=alice/tiny-sbert"])
    with pytest.raises(ConfigError) as err:
        train_run.train(cfg)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("push_to_hub=alice/tiny-sbert needs the Hugging Face Hub, but HF_HUB_OFFLINE=1")
    assert message.endswith(f"python -m sts_lightning.runs.hub_push {run}/export alice/tiny-sbert")  # how to push once online
    assert not (run / "checkpoints").exists() and not (run / "export").exists()


@pytest.mark.parametrize("overrides, expected", [
    (["push_to_hub=tiny-sbert"], "is not a Hugging Face repo id"),
    (["push_to_hub=alice/bad--name"], "is not a Hugging Face repo id"),
    (["push_to_hub=alice/tiny", "export=false"], "but export=false"),
])
def test_config_errors_before_training(overrides, expected, hub, monkeypatch, tmp_path, tiny_model_dir,
                                       train_data_dir):
    from sts_lightning.runs import train_run

    monkeypatch.setattr(train_run, "_build", lambda *a, **k: pytest.fail("built before the hub check"))
    cfg = compose_train_config(tmp_path / "run", tiny_model_dir, train_data_dir, overrides)
    with pytest.raises(ConfigError, match=expected):
        train_run.train(cfg)
    assert hub == []  # refused before the hub is asked


def test_train_pushes_the_export_with_card_and_manifest(hub, card_in_every_export, monkeypatch, tmp_path,
                                                        tiny_model_dir, train_data_dir, one_thread):
    from sts_lightning.runs import train_run

    built = []
    original_build = train_run._build
    monkeypatch.setattr(train_run, "_build", lambda *a, **k: built.append(len(hub)) or original_build(*a, **k))
    run = tmp_path / "run"
    cfg = compose_train_config(run, tiny_model_dir, train_data_dir,
               ["push_to_hub=sts-lab/tiny-sbert", "trainer.max_steps=1", "callbacks.sts_evaluation.tasks=[stsb-dev]"])
    train_run.train(cfg)

    assert [name for name, _ in hub] == ["whoami", "create_repo", "upload_folder"]
    assert built and built[0] == 1  # the hub was asked before the first thing was built
    create, upload = hub[1][1], hub[2][1]
    assert create["repo_id"] == "sts-lab/tiny-sbert" and create["private"] is True and create["exist_ok"] is True
    export = run / "export"
    assert upload["repo_id"] == "sts-lab/tiny-sbert"
    assert Path(upload["folder_path"]) == export
    files = upload["files"]
    assert {"README.md", export_manifest.MANIFEST_FILE, "model.safetensors", "config.json"} <= set(files)
    listed = json.loads(files[export_manifest.MANIFEST_FILE])["files"]
    assert "README.md" in listed and "model.safetensors" in listed  # the card is checksummed with the weights


def test_no_push_without_push_to_hub(hub, tmp_path, tiny_model_dir, train_data_dir):
    cfg = compose_train_config(tmp_path / "run", tiny_model_dir, train_data_dir)
    assert cfg.push_to_hub is None and cfg.push_private is True
    assert hub_push.check_hub_push(cfg) is None
    assert hub_push.push_from_config(cfg, tmp_path / "nowhere") is None
    assert hub == []


# ----------------------------------------------------------------------------------- the hub checks


def _access(repo_id: str, timeout: float = hub_push.HUB_TIMEOUT_S) -> str:
    """The CLI's two hub checks in a row: the local one, then the one call."""
    token = hub_push.check_hub_local(repo_id, "push", "later")
    return hub_push.ask_hub(repo_id, token, "push", "later", timeout=timeout)


def test_write_token_in_an_org_passes(hub):
    assert _access("sts-lab/tiny") == "alice"
    assert hub == [("whoami", {"token": "hf_test_token"})]


def test_only_rank_zero_asks_the_hub(hub, monkeypatch, tmp_path, tiny_model_dir, train_data_dir):
    """Every DDP process runs train(); whoami is rate-limited, so the other ranks check only what is local."""
    cfg = compose_train_config(tmp_path / "run", tiny_model_dir, train_data_dir, ["push_to_hub=alice/tiny"])
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert hub_push.check_hub_push(cfg) == "alice/tiny"
    assert hub == []
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the local checks still run there
    with pytest.raises(ConfigError, match="HF_HUB_OFFLINE=1"):
        hub_push.check_hub_push(cfg)


def test_no_token_is_one_line(hub, monkeypatch):
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    with pytest.raises(ConfigError, match=r"needs a Hugging Face token with write access: set HF_TOKEN"):
        _access("alice/tiny")
    assert hub == []


def test_unreachable_hub_is_one_line(hub, monkeypatch):
    def refuse(self, token=None, **kwargs):
        raise ConnectionError("[Errno -3] Temporary failure in name resolution\nmore detail")

    monkeypatch.setattr(huggingface_hub.HfApi, "whoami", refuse)
    with pytest.raises(ConfigError) as err:
        _access("alice/tiny")
    assert "\n" not in str(err.value)
    assert "the hub is unreachable or refused the token (ConnectionError: [Errno -3]" in str(err.value)


def test_silent_hub_times_out(hub, monkeypatch):
    monkeypatch.setattr(huggingface_hub.HfApi, "whoami", lambda self, token=None, **k: time.sleep(5))
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"TimeoutError: no answer from the hub within 0.2 s"):
        _access("alice/tiny", timeout=0.2)
    assert time.monotonic() - started < 3


@pytest.mark.parametrize("info, repo, expected", [
    ({"name": "alice", "auth": {"accessToken": {"role": "read"}}}, "alice/tiny", "read-only"),
    (WHOAMI, "bob/tiny", "cannot create repos under 'bob'"),
])
def test_token_that_cannot_write_there(hub, monkeypatch, info, repo, expected):
    monkeypatch.setattr(huggingface_hub.HfApi, "whoami", lambda self, token=None, **k: info)
    with pytest.raises(ConfigError, match=expected):
        _access(repo)


# ----------------------------------------------------------------------------------- the CLI


def test_cli_pushes_an_existing_export(hub, tmp_path, capsys):
    folder = _export(tmp_path)
    hub_push.main([str(folder), "alice/tiny", "--public", "--message", "first"])
    assert capsys.readouterr().out.strip() == "https://huggingface.co/alice/tiny"
    (_, create), (_, upload) = hub[1], hub[2]
    assert create["private"] is False
    assert upload["folder_path"] == str(folder) and upload["commit_message"] == "first"
    assert set(upload["files"]) == {"README.md", "config.json", "model.safetensors", "export_manifest.json"}


def test_cli_refuses_a_damaged_export_before_the_network(hub, tmp_path, capsys):
    folder = _export(tmp_path)
    _flip_one_bit(folder / "model.safetensors")
    line = _error_line(capsys, [str(folder), "alice/tiny"])
    assert "model.safetensors: checksum differs from the export manifest" in line
    assert "damaged" in line
    assert hub == []  # not even whoami


@pytest.mark.parametrize("card, manifest, expected", [
    (False, True, "no model card (README.md)"),
    (True, False, "no export_manifest.json"),
])
def test_cli_refuses_an_export_without_card_or_manifest(hub, tmp_path, capsys, card, manifest, expected):
    folder = _export(tmp_path, card=card, manifest=manifest)
    assert expected in _error_line(capsys, [str(folder), "alice/tiny"])
    assert hub == []


def test_cli_offline_is_one_line(offline, tmp_path, capsys):
    folder = _export(tmp_path)
    line = _error_line(capsys, [str(folder), "alice/tiny"])
    assert line == ("error: pushing to alice/tiny needs the Hugging Face Hub, but HF_HUB_OFFLINE=1: unset "
                    "HF_HUB_OFFLINE, then run this command again")


def test_failed_upload_names_the_retry(hub, monkeypatch, tmp_path):
    def drop(self, **kwargs):
        raise OSError("connection reset by peer")

    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", drop)
    folder = _export(tmp_path)
    with pytest.raises(DataError) as err:
        hub_push.push_export(folder, "alice/tiny")
    assert f"the export is intact, retry with: python -m sts_lightning.runs.hub_push {folder} alice/tiny" in str(err.value)
