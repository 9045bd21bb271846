"""Publish a training export on the Hugging Face Hub: ``push_to_hub=<owner>/<name>`` or ``python -m sts_lightning.runs.hub_push``.

``check_hub_push`` runs in ``train()`` before anything is built, so offline, no token, a bad repo id or a
read-only token fail in one line before hours of training, not after. The export must verify against its
manifest and carry a model card before it leaves the machine. Private unless ``--public``.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import threading
from pathlib import Path

import huggingface_hub
import huggingface_hub.constants
from omegaconf import DictConfig

from sts_lightning.embeddings.errors import ConfigError, DataError, run_or_exit
from sts_lightning.embeddings.io.export_manifest import MANIFEST_FILE, verify_export
from sts_lightning.embeddings.io.input_file import require_dir
from sts_lightning.embeddings.io.model_card import CARD_FILE

log = logging.getLogger(__name__)

HUB_TIMEOUT_S = 15.0
# The hub's own rule (huggingface_hub.utils.validate_repo_id), plus a required owner so it is never a guess
# which namespace a run publishes to.
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}$")
TRUE = {"1", "on", "yes", "true"}


def _one_line(err: BaseException) -> str:
    """``Type: first line`` of an exception: hub errors carry multi-line server bodies."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def check_repo_id(repo_id: str, what: str) -> str:
    """``repo_id`` when it looks like ``owner/name`` (letters, digits, ``-_.``, no ``--`` / ``..``)."""
    repo_id = str(repo_id)
    if not REPO_ID.match(repo_id) or "--" in repo_id or ".." in repo_id or repo_id.endswith((".git", ".")):
        raise ConfigError(f"{what}: {repo_id!r} is not a Hugging Face repo id; use <user or org>/<name>, "
                          "e.g. push_to_hub=alice/sbert-nli-minilm")
    return repo_id


def hub_offline() -> str | None:
    """Why the hub cannot be reached (the environment now, or ``huggingface_hub``'s flag at import), or ``None``."""
    value = os.environ.get("HF_HUB_OFFLINE", "")
    if value.strip().lower() in TRUE:
        return f"HF_HUB_OFFLINE={value}"
    if huggingface_hub.constants.HF_HUB_OFFLINE:
        return "huggingface_hub is in offline mode (HF_HUB_OFFLINE was set when it was imported)"
    return None


def _whoami(token: str, timeout: float) -> dict:
    """``HfApi.whoami`` with a deadline (the client has none); a daemon thread, so a hung request never blocks exit."""
    result: dict = {}

    def call() -> None:
        try:
            result["info"] = huggingface_hub.HfApi().whoami(token=token)
        except Exception as err:  # network, proxy, refused token: reported below as one line
            result["error"] = err

    thread = threading.Thread(target=call, name="hub-whoami", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"no answer from the hub within {timeout:g} s")
    if "error" in result:
        raise result["error"]
    return result["info"]


def check_hub_local(repo_id: str, what: str, hint: str) -> str:
    """The checks that need no network: a valid repo id, the hub not switched off, a token (returned)."""
    check_repo_id(repo_id, what)
    offline = hub_offline()
    if offline:
        raise ConfigError(f"{what} needs the Hugging Face Hub, but {offline}: unset HF_HUB_OFFLINE, {hint}")
    token = huggingface_hub.get_token()
    if not token:
        raise ConfigError(f"{what} needs a Hugging Face token with write access: set HF_TOKEN or run "
                          f"`hf auth login`, {hint}")
    return token


def ask_hub(repo_id: str, token: str, what: str, hint: str, timeout: float = HUB_TIMEOUT_S) -> str:
    """One ``whoami`` call: the hub answers and the token may write into ``repo_id``'s owner; returns the user."""
    try:
        info = _whoami(token, timeout)
    except Exception as err:
        raise ConfigError(f"{what} needs the Hugging Face Hub, but the hub is unreachable or refused the token "
                          f"({_one_line(err)}): check the network / HF_ENDPOINT / HF_TOKEN, {hint}") from None
    user = str(info.get("name", ""))
    role = ((info.get("auth") or {}).get("accessToken") or {}).get("role")
    if role == "read":
        raise ConfigError(f"{what}: the Hugging Face token of {user} is read-only; create one with write access")
    owner = repo_id.split("/", 1)[0]
    namespaces = {user, *(str(org.get("name")) for org in info.get("orgs") or [] if isinstance(org, dict))}
    if user and owner not in namespaces:
        raise ConfigError(f"{what}: the token belongs to {user!r}, who cannot create repos under {owner!r} "
                          f"(theirs: {', '.join(sorted(namespaces))})")
    log.info("%s: the hub answers, token of %s", what, user or "an unnamed user")
    return user


def _process_rank() -> int:
    """This process's global rank from the variables Lightning reads, in its order (importing Lightning is slow)."""
    for name in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def check_hub_push(cfg: DictConfig) -> str | None:
    """``train()``'s check, before anything is built: ``None`` when ``push_to_hub`` is unset, else the repo id."""
    repo_id = cfg.get("push_to_hub")
    if not repo_id:
        return None
    if not cfg.get("export"):
        raise ConfigError(f"push_to_hub={repo_id} uploads the run's export, but export=false (debug=fast and "
                          "debug=overfit switch it off): set export=true or drop push_to_hub")
    repo_id, what = str(repo_id), f"push_to_hub={repo_id}"
    hint = f"or drop push_to_hub and push the export later: python -m sts_lightning.runs.hub_push {cfg.output_dir}/export {repo_id}"
    token = check_hub_local(repo_id, what, hint)
    # whoami is rate-limited: rank 0 asks; the local checks run everywhere.
    if _process_rank() == 0:
        ask_hub(repo_id, token, what, hint)
    return repo_id


def check_export(export_dir: str | os.PathLike) -> Path:
    """The export directory when it may be published: a manifest that verifies, and a model card."""
    folder = require_dir(export_dir, "export directory")
    if not verify_export(folder):  # DataError naming the first damaged file
        raise DataError(f"{folder}: no {MANIFEST_FILE}, so nothing shows the files are the ones the run exported; "
                        "push only an export written by train.py (an older one: export it again)")
    card = folder / CARD_FILE
    if not card.is_file() or not card.read_text(encoding="utf-8", errors="replace").strip():
        raise DataError(f"{folder}: no model card ({CARD_FILE}); the hub page would not say what the model is. "
                        "Export it again with this version of train.py")
    return folder


def push_export(export_dir: str | os.PathLike, repo_id: str, *, private: bool = True,
                commit_message: str | None = None) -> str:
    """Upload a verified export to ``repo_id``; returns its URL. DataError: damaged export, or a failed upload."""
    return upload_export(check_export(export_dir), repo_id, private=private, commit_message=commit_message)


def upload_export(folder: Path, repo_id: str, *, private: bool, commit_message: str | None) -> str:
    """``create_repo`` + ``upload_folder`` of a folder ``check_export`` has passed (the checksums are not read again)."""
    api = huggingface_hub.HfApi()
    message = commit_message or f"Upload {folder.parent.name}/{folder.name} (sts-lightning export)"
    try:
        url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="model", commit_message=message)
    except Exception as err:  # network drop, quota, permission: the export itself is fine
        raise DataError(f"pushing {folder} to {repo_id} failed ({_one_line(err)}); the export is intact, retry "
                        f"with: python -m sts_lightning.runs.hub_push {folder} {repo_id}") from None
    url = str(url) if url else f"https://huggingface.co/{repo_id}"
    log.info("pushed %s to %s (%s)", folder, url, "private" if private else "public")
    return url


def push_from_config(cfg: DictConfig, export_dir: str | os.PathLike) -> str | None:
    """``train()``'s push after the export is written (rank zero); a no-op without ``push_to_hub``."""
    repo_id = cfg.get("push_to_hub")
    if not repo_id:
        return None
    return push_export(export_dir, str(repo_id), private=bool(cfg.get("push_private", True)))


def push(export_dir: str, repo_id: str, private: bool, message: str | None) -> str:
    what, hint = f"pushing to {repo_id}", "then run this command again"
    token = check_hub_local(repo_id, what, hint)
    folder = check_export(export_dir)
    ask_hub(repo_id, token, what, hint)
    url = upload_export(folder, repo_id, private=private, commit_message=message)
    print(url)
    return url


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sts_lightning.runs.hub_push", description=__doc__.splitlines()[0])
    parser.add_argument("export_dir", help="a train.py export directory (<run dir>/export)")
    parser.add_argument("repo_id", help="<user or org>/<name> on the Hugging Face Hub")
    visibility = parser.add_mutually_exclusive_group()
    visibility.add_argument("--private", dest="private", action="store_true", default=True,
                            help="a private repository (the default)")
    visibility.add_argument("--public", dest="private", action="store_false", help="a public repository")
    parser.add_argument("--message", default=None, help="commit message")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    run_or_exit(push, args.export_dir, args.repo_id, args.private, args.message)


if __name__ == "__main__":
    main()
