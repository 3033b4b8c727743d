"""The text each built-in task shows the agent (`description.md`), in the spirit of the Kaggle
competition it mirrors: what to predict, the files, the metric, the submission format. No hints
about how to model the data."""

SPOOKY = """# Spooky Author Identification (mini)

## Overview

A crate of unbound manuscripts has spilled across the archive floor. Every loose sentence was
written by one of three authors, known here by their initials: EAP, HPL and MWS. Your task is to
predict, for each sentence in the test set, the probability that each author wrote it.

## Evaluation

Submissions are evaluated using multi-class logarithmic loss. Each id has one true author. For each
id you submit a predicted probability for each of the three authors:

$$\\text{log loss} = -\\frac{1}{N} \\sum_{i=1}^N \\sum_{j=1}^M y_{ij} \\log(p_{ij})$$

where N is the number of sentences in the test set, M = 3 is the number of authors, log is the
natural logarithm, y_ij is 1 if sentence i was written by author j and 0 otherwise, and p_ij is
your predicted probability. Lower is better. The probabilities of each row must be between 0 and 1
and sum to one.

## Submission File

A CSV with a header, the id and one probability column per author, one row per test sentence (the
order of the rows does not matter):

```
id,EAP,HPL,MWS
id07943,0.33,0.33,0.34
...
```

# Dataset Description

## Files

- **train.csv** - the training set: `id`, `text`, `author`
- **test.csv** - the test set: `id`, `text`
- **sample_submission.csv** - a sample submission in the correct format

## Data fields

- **id** - a unique identifier for each sentence
- **text** - a sentence written by one of the authors
- **author** - the author of the sentence (EAP, HPL or MWS)
"""

CACTUS = """# Aerial Cactus Identification (mini)

## Overview

A survey drone flew over a protected desert area and cut its footage into small 32x32 tiles. To
monitor the area, we need to know which tiles show a columnar cactus. Your task is to predict, for
each tile in the test set, the probability that it contains a cactus.

## Evaluation

Submissions are evaluated on the area under the ROC curve between the predicted probability and
the observed target. Higher is better.

## Submission File

A CSV with a header and one row per test image: its file name as `id`, and the probability
`has_cactus` in [0, 1]:

```
id,has_cactus
0a1b2c3d.png,0.5
...
```

# Dataset Description

## Files

- **train/** - the training images (32x32 RGB PNG), named by id
- **train.csv** - the labels of the training images: `id`, `has_cactus` (1 or 0)
- **test/** - the test images; predict `has_cactus` for each
- **sample_submission.csv** - a sample submission in the correct format
"""

PLANT = """# Plant Pathology (mini)

## Overview

Misdiagnosed leaf diseases cost orchards dearly. Each image shows one apple leaf (32x32 RGB) that
is healthy, has rust, has scab, or has more than one disease. Your task is to predict, for each
test image, the probability of each of the four categories.

## Evaluation

Submissions are evaluated on the mean column-wise ROC AUC: the ROC AUC of each of the four
predicted columns against the true labels, averaged. Higher is better.

## Submission File

A CSV with a header: `image_id` and one column per category, one row per test image:

```
image_id,healthy,multiple_diseases,rust,scab
Test_0,0.25,0.25,0.25,0.25
...
```

# Dataset Description

## Files

- **images/** - all images, training and test, as `<image_id>.png`
- **train.csv** - `image_id` and the one-hot labels `healthy`, `multiple_diseases`, `rust`, `scab`
- **test.csv** - the `image_id` of each test image
- **sample_submission.csv** - a sample submission in the correct format
"""

DOGSCATS = """# Dogs vs. Cats (mini)

## Overview

Each 32x32 RGB image shows the head of either a dog or a cat. Your task is to predict, for each
test image, the probability that it shows a dog (1 = dog, 0 = cat).

## Evaluation

Submissions are scored on the log loss:

$$\\textrm{LogLoss} = - \\frac{1}{n} \\sum_{i=1}^n \\left[ y_i \\log(\\hat{y}_i) + (1 - y_i) \\log(1 - \\hat{y}_i)\\right]$$

where n is the number of test images, y_i is 1 if image i is a dog and 0 if a cat, and
\\hat{y}_i is your predicted probability that image i is a dog. Lower is better.

## Submission File

A CSV with a header and one row per test image: its numeric `id` and `label`, the probability in
[0, 1] that it is a dog:

```
id,label
1,0.5
2,0.5
...
```

# Dataset Description

## Files

- **train/** - the training images, named by label: `cat.<n>.png` and `dog.<n>.png`
- **test/** - the test images, named `<id>.png` with numeric ids 1..N
- **sample_submission.csv** - a sample submission in the correct format
"""  # noqa: E501 (the log-loss formula above is one line of the text the model reads)
