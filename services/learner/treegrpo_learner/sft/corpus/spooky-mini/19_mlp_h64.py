# /// script
# requires-python = ">=3.10"
# dependencies = ["numpy", "pandas", "scikit-learn", "torch"]
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
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import log_loss
from sklearn.model_selection import train_test_split

torch.manual_seed(0)
torch.set_num_threads(1)
train = pd.read_csv("./input/train.csv")
test = pd.read_csv("./input/test.csv")
classes = ["EAP", "HPL", "MWS"]
y = train["author"].map({c: i for i, c in enumerate(classes)}).values

vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, max_features=3000, sublinear_tf=True)
X = vec.fit_transform(train["text"]).toarray().astype(np.float32)
X_test = vec.transform(test["text"]).toarray().astype(np.float32)
X_tr, X_va, y_tr, y_va = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)


def fit(X, y, epochs=6):
    net = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 64), torch.nn.ReLU(),
                              torch.nn.Dropout(0.3), torch.nn.Linear(64, 3))
    opt = torch.optim.Adam(net.parameters(), lr=0.002, weight_decay=1e-5)
    xb, yb = torch.from_numpy(X), torch.from_numpy(y).long()
    for _ in range(epochs):
        for idx in torch.randperm(len(xb)).split(64):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(xb[idx]), yb[idx]).backward()
            opt.step()
    return net.eval()


def predict(net, X):
    with torch.no_grad():
        return torch.softmax(net(torch.from_numpy(X)), dim=1).numpy()


net = fit(X_tr, y_tr)
print(f"Validation metric: {log_loss(y_va, predict(net, X_va)):.5f}")

net = fit(X, y)
sub = pd.DataFrame(predict(net, X_test), columns=classes)
sub.insert(0, "id", test["id"])
os.makedirs("./submission", exist_ok=True)
sub.to_csv("./submission/submission.csv", index=False)
