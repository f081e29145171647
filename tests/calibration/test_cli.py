"""``robopin calibrate``: board printing, show, solve from a samples file (no simulator needed)."""

from __future__ import annotations

import json

import cv2
import numpy as np

from robopin.calibration import BoardConfig, BoardDetector, BoardView, CaptureSample, save_calibration, save_samples
from robopin.calibration.handeye import predicted_cam_board
from robopin.cli import main
from robopin.geometry import CameraModel, make_transform, rpy_to_matrix
from tests.calibration.test_storage import static_record


def test_board_command_writes_a_detectable_board_of_the_stated_size(tmp_path, capsys):
    out = tmp_path / "board.png"
    assert main(["calibrate", "board", "--out", str(out), "--squares", "6", "4", "--dpi", "150"]) == 0
    printed = capsys.readouterr().out
    assert "240 x 160 mm" in printed
    config = BoardConfig(**json.loads(printed.strip().splitlines()[-1]))
    image = cv2.imread(str(out))
    assert image is not None and image.shape[1] == round((0.24 + 0.02) * 150 / 0.0254)
    # Seen square-on by a camera whose pixels are the print's, the board's pose is the print's geometry.
    h, w = image.shape[:2]
    f = 150 / 0.0254 * 0.5  # a camera 0.5 m away that maps the print 1:1
    view = BoardDetector(config).detect(image[:, :, ::-1].copy(), CameraModel(w, h, f, f, w / 2 - 0.5, h / 2 - 0.5))
    assert view.ok, view.message
    assert abs(view.T_cam_board[2, 3] - 0.5) < 0.005


def test_show_states_the_direction(tmp_path, capsys):
    path = save_calibration(static_record(), tmp_path / "static.yaml")
    assert main(["calibrate", "show", str(path)]) == 0
    out = capsys.readouterr().out
    assert "T_base_static_optical" in out and "maps points in static_optical into base" in out


def test_solve_from_a_samples_file(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = make_transform(rpy_to_matrix(0.0, 0.1, 1.5), [0.07, 0.0, -0.1])
    Y = make_transform(np.diag([1.0, -1.0, -1.0]), [0.4, 0.1, 0.0])
    samples = []
    for i in range(7):
        A = make_transform(
            rpy_to_matrix(np.pi + rng.uniform(-0.4, 0.4), rng.uniform(-0.4, 0.4), rng.uniform(-1, 1)),
            np.array([0.4, 0.0, 0.4]) + rng.uniform(-0.05, 0.05, 3),
        )
        samples.append(CaptureSample(i, A, BoardView(True, T_cam_board=predicted_cam_board("eye_in_hand", X, Y, A))))
    path = save_samples(tmp_path / "wrist.samples.yaml", "eye_in_hand", samples)
    assert main(["calibrate", "solve", str(path), "--method", "park", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["method"] == "park"
    assert np.allclose(result["T_mount_cam"], X, atol=1e-6)
