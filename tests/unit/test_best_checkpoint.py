"""The best checkpoint of a run that was resumed into a new folder is the best of the whole run
(core.training.resume)."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger

from core.training.resume import BestCheckpoint

#: the validation score of each epoch: the second scores lower than the first, the third higher than both
SCORES = [0.9, 0.5, 0.95]


class Scored(L.LightningModule):
    """A one-weight model whose validation score at epoch e is SCORES[e]."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def training_step(self, batch, batch_index):
        return (self.weight - batch[0]).pow(2).mean()

    def validation_step(self, batch, batch_index):
        self.log("score", SCORES[self.current_epoch])

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(4, 1)), batch_size=2)

    val_dataloader = train_dataloader


def fit_chunk(root: Path, epochs: int, resume: Path | None, callback: type[ModelCheckpoint]) -> Path:
    """One chunk of a run, as the CLI runs it: a new logs/version_N/ each time; its checkpoint folder."""
    trainer = L.Trainer(
        max_epochs=epochs, default_root_dir=root, logger=CSVLogger(root, name="logs"),
        callbacks=[callback(monitor="score", mode="max", filename="best", save_last=True)],
        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
    )  # fmt: skip
    trainer.fit(Scored(), ckpt_path=resume)
    return Path(trainer.checkpoint_callback.dirpath)


def epoch_of(path: Path) -> int:
    return torch.load(path, weights_only=True)["epoch"]


@pytest.mark.filterwarnings("ignore:The dirpath has changed")
@pytest.mark.parametrize("callback", [BestCheckpoint, ModelCheckpoint])
def test_a_resumed_run_keeps_its_best_checkpoint_until_a_better_one(tmp_path, callback):
    first = fit_chunk(tmp_path, 1, None, callback)
    second = fit_chunk(tmp_path, 2, first / "last.ckpt", callback)
    third = fit_chunk(tmp_path, 3, second / "last.ckpt", callback)
    assert (first.parent.name, second.parent.name, third.parent.name) == ("version_0", "version_1", "version_2")
    if callback is ModelCheckpoint:  # Lightning's own: the second folder's best is its own epoch, which scored lower
        assert epoch_of(second / "best.ckpt") == 1
        return
    assert epoch_of(first / "best.ckpt") == 0
    assert epoch_of(second / "best.ckpt") == 0  # epoch 1 scored 0.5 < 0.9: the run's best is still epoch 0's
    assert epoch_of(third / "best.ckpt") == 2  # epoch 2 scored 0.95: it replaced it
    assert epoch_of(first / "best.ckpt") == 0 and epoch_of(second / "best.ckpt") == 0  # the copies left as they were
    assert not list(third.glob("best-v*.ckpt"))  # replaced under its name, no second "best"


def test_the_callback_state_is_lightnings_so_checkpoints_of_either_restore_into_the_other():
    ours = BestCheckpoint(monitor="val/CIDEr", mode="max", filename="best")
    theirs = ModelCheckpoint(monitor="val/CIDEr", mode="max", filename="best")
    assert ours.state_key == theirs.state_key and ours.state_key.startswith("ModelCheckpoint{")


@pytest.mark.filterwarnings("ignore:The dirpath has changed")
def test_the_run_folders_best_ckpt_is_the_best_of_the_run_whichever_version_folder_holds_it(tmp_path):
    """runs/NAME/best.ckpt, the path the README gives, stays right when a resumed fit (or a `test`, which logs to a
    version folder of its own) moves on to the next logs/version_N/: it links to the best checkpoint kept so far."""
    first = fit_chunk(tmp_path, 1, None, BestCheckpoint)
    best = tmp_path / "best.ckpt"
    assert best.is_symlink() and best.resolve() == (first / "best.ckpt").resolve() and epoch_of(best) == 0
    (tmp_path / "logs" / "version_1").mkdir()  # what a `test` run in the same folder leaves
    second = fit_chunk(tmp_path, 2, first / "last.ckpt", BestCheckpoint)
    assert second.parent.name == "version_2" and epoch_of(best) == 0  # epoch 1 scored lower: still epoch 0's
    third = fit_chunk(tmp_path, 3, second / "last.ckpt", BestCheckpoint)
    assert best.resolve() == (third / "best.ckpt").resolve() and epoch_of(best) == 2
    assert not Path(str(best.readlink())).is_absolute()  # the run folder can be moved or copied whole
