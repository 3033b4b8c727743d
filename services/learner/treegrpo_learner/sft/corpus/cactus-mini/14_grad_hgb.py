# /// script
# requires-python = ">=3.10"
# dependencies = ["numpy", "pandas", "pillow", "scikit-learn"]
#
# [tool.resources]
# cpu = 1
# mem = 2
# ephemeral = 1
# ///
import os

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.dummy import DummyClassifier
from sklearn.ensemble import ExtraTreesClassifier
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.naive_bayes import GaussianNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.model_selection import train_test_split


def load_image(path):
    return np.asarray(Image.open(path).convert("RGB"), dtype=np.float32) / 255.0


def features(img):
    gray = img.mean(axis=2)
    gy, gx = np.gradient(gray)
    mag = np.hypot(gx, gy)
    edges = np.histogram(mag, bins=12, range=(0, 0.5))[0]
    return np.concatenate([edges, img.mean(axis=(0, 1)), img.std(axis=(0, 1))])


train = pd.read_csv("./input/train.csv")
sub = pd.read_csv("./input/sample_submission.csv")
X = np.stack([features(load_image(f"./input/train/{i}")) for i in train["id"]])
y = train["has_cactus"].values
X_test = np.stack([features(load_image(f"./input/test/{i}")) for i in sub["id"]])

X_tr, X_va, y_tr, y_va = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
model = HistGradientBoostingClassifier(max_iter=100, learning_rate=0.1, random_state=0)
model.fit(X_tr, y_tr)
print(f"Validation metric: {roc_auc_score(y_va, model.predict_proba(X_va)[:, 1]):.5f}")

model.fit(X, y)
sub["has_cactus"] = model.predict_proba(X_test)[:, 1]
os.makedirs("./submission", exist_ok=True)
sub.to_csv("./submission/submission.csv", index=False)
