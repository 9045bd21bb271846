"""The loading note's evaluate.py line, read back: how the Python API and the field table score an export."""
import pytest

from sts_lightning.embeddings.errors import DataError
from sts_lightning.embeddings.io.export_note import evaluate_command, read_loading_command, write_loading_note


def test_the_written_command_reads_back_with_the_export_in_place_of_the_placeholder(tmp_path):
    write_loading_note(tmp_path, "a flow", evaluate_command(["all-MiniLM-L6-v2"], "{name:flow,path:<export>}", 32),
                       "no sentence-transformers module")
    assert read_loading_command(tmp_path) == (["all-MiniLM-L6-v2"], f"{{name:flow,path:{tmp_path}}}",
                                              ["encoder.max_length=32"])


def test_a_note_without_a_command_or_no_note_is_one_clear_error(tmp_path):
    with pytest.raises(DataError, match="cannot read the export's loading note"):
        read_loading_command(tmp_path)
    (tmp_path / "LOADING.md").write_text("# Loading this export\n\nnothing here\n")
    with pytest.raises(DataError, match="no `python evaluate.py"):
        read_loading_command(tmp_path)
