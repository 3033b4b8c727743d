# /// script
# requires-python = ">=3.10"
# dependencies = ["numpy", "pandas", "scikit-learn"]
#
# [tool.resources]
# cpu = 1
# mem = 2
# ephemeral = 1
# ///
import os

import numpy as np
import pandas as pd
from sklearn.calibration import CalibratedClassifierCV
from sklearn.decomposition import TruncatedSVD
from sklearn.dummy import DummyClassifier
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.ensemble import RandomForestClassifier
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.linear_model import SGDClassifier
from sklearn.naive_bayes import MultinomialNB
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split

train = pd.read_csv("./input/train.csv")
test = pd.read_csv("./input/test.csv")
classes = ["EAP", "HPL", "MWS"]
y = train["label"].map({c: i for i, c in enumerate(classes)}).values

vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
X = vec.fit_transform(train["text"])
X_test = vec.transform(test["text"])

X_tr, X_va, y_tr, y_va = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
model = LogisticRegression(C=4, max_iter=2000)
model.fit(X_tr, y_tr)
print(f"Validation metric: {log_loss(y_va, model.predict_proba(X_va)):.5f}")

model.fit(X, y)
proba = model.predict_proba(X_test)
sub = pd.DataFrame(proba, columns=classes)
sub.insert(0, "id", test["id"])
os.makedirs("./submission", exist_ok=True)
sub.to_csv("./submission/submission.csv", index=False)
