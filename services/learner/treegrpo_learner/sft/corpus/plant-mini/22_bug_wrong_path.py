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
    return np.concatenate([np.histogram(img[..., c], bins=8, range=(0, 1))[0] for c in range(3)])


labels = ["healthy", "multiple_diseases", "rust", "scab"]
train = pd.read_csv("./input/train.csv")
test = pd.read_csv("./input/test.csv")
X = np.stack([features(load_image(f"./input/images/{i}.jpg")) for i in train["image_id"]])
y = train[labels].values.argmax(axis=1)
X_test = np.stack([features(load_image(f"./input/images/{i}.png")) for i in test["image_id"]])

X_tr, X_va, y_tr, y_va = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
model = RandomForestClassifier(n_estimators=200, max_depth=None, n_jobs=1, random_state=0)
model.fit(X_tr, y_tr)
print(f"Validation metric: {roc_auc_score(np.eye(4)[y_va], model.predict_proba(X_va), average='macro'):.5f}")

model.fit(X, y)
proba = model.predict_proba(X_test)
sub = pd.DataFrame(proba, columns=labels)
sub.insert(0, "image_id", test["image_id"])
os.makedirs("./submission", exist_ok=True)
sub.to_csv("./submission/submission.csv", index=False)
