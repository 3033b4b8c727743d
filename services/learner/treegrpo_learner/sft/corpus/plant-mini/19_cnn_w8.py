# /// script
# requires-python = ">=3.10"
# dependencies = ["numpy", "pandas", "pillow", "scikit-learn", "torch"]
#
# [tool.resources]
# cpu = 1
# mem = 3
# ephemeral = 1
# ///
import os

import numpy as np
import pandas as pd
import torch
from PIL import Image
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split

torch.set_num_threads(1)


def load_image(path):
    return np.asarray(Image.open(path).convert("RGB"), dtype=np.float32) / 255.0


def features(img):
    return img.transpose(2, 0, 1)


class SmallCNN:
    """A two-block conv net with a scikit-learn style fit / predict_proba."""

    def __init__(self, n_classes, epochs=3, lr=0.003, width=8):
        self.n_classes, self.epochs, self.lr, self.width = n_classes, epochs, lr, width

    def fit(self, X, y):
        torch.manual_seed(0)
        w = self.width
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(3, w, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(w, 2 * w, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(2 * w * 8 * 8, 64), torch.nn.ReLU(),
            torch.nn.Linear(64, self.n_classes))
        opt = torch.optim.Adam(self.net.parameters(), lr=self.lr)
        xb, yb = torch.from_numpy(X), torch.from_numpy(y).long()
        for _ in range(self.epochs):
            for idx in torch.randperm(len(xb)).split(64):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(self.net(xb[idx]), yb[idx]).backward()
                opt.step()
        return self

    def predict_proba(self, X):
        with torch.no_grad():
            return torch.softmax(self.net.eval()(torch.from_numpy(X)), dim=1).numpy()


labels = ["healthy", "multiple_diseases", "rust", "scab"]
train = pd.read_csv("./input/train.csv")
test = pd.read_csv("./input/test.csv")
X = np.stack([features(load_image(f"./input/images/{i}.png")) for i in train["image_id"]])
y = train[labels].values.argmax(axis=1)
X_test = np.stack([features(load_image(f"./input/images/{i}.png")) for i in test["image_id"]])

X_tr, X_va, y_tr, y_va = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
model = SmallCNN(n_classes=4)
model.fit(X_tr, y_tr)
print(f"Validation metric: {roc_auc_score(np.eye(4)[y_va], model.predict_proba(X_va), average='macro'):.5f}")

model.fit(X, y)
proba = model.predict_proba(X_test)
sub = pd.DataFrame(proba, columns=labels)
sub.insert(0, "image_id", test["image_id"])
os.makedirs("./submission", exist_ok=True)
sub.to_csv("./submission/submission.csv", index=False)
