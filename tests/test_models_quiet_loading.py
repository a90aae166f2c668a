"""Loading a checkpoint leaves nothing on stderr (transformers 5 draws a "Loading weights" bar otherwise), and the
caller's transformers settings are restored afterwards."""

from __future__ import annotations

from transformers.utils import logging as hf_logging

from taser_lib.models import build_model, load_encoder, load_model, quiet_loading

from training_helpers import make_tiny_bert, one_thread  # noqa: F401 - fixture


def test_loading_saved_and_plain_checkpoints_is_silent(tmp_path, capfd, one_thread):
    bert = make_tiny_bert(tmp_path / "bert")
    build_model("taser", bert).save_pretrained(tmp_path / "taser")
    capfd.readouterr()
    load_model(tmp_path / "taser")
    load_encoder(bert, show_progress=False)   # a plain BERT folder: TaserModel.from_bert -> load_bert
    err = capfd.readouterr().err
    assert "Loading weights" not in err and err.strip() == ""


def test_quiet_loading_restores_the_callers_settings():
    hf_logging.enable_progress_bar()
    hf_logging.set_verbosity_info()
    try:
        with quiet_loading():
            assert not hf_logging.is_progress_bar_enabled()
            assert hf_logging.get_verbosity() == hf_logging.ERROR
        assert hf_logging.is_progress_bar_enabled() and hf_logging.get_verbosity() == hf_logging.INFO
        hf_logging.disable_progress_bar()
        with quiet_loading():
            pass
        assert not hf_logging.is_progress_bar_enabled()   # a caller who turned bars off keeps them off
    finally:
        hf_logging.enable_progress_bar()
        hf_logging.set_verbosity_warning()
