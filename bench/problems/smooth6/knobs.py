"""A 6-D smooth multimodal function (a shifted Levy function): the knobs the loop may edit."""

X1 = 0.0   # hone: -5.0..5.0
X2 = 0.0   # hone: -5.0..5.0
X3 = 0.0   # hone: -5.0..5.0
X4 = 0.0   # hone: -5.0..5.0
X5 = 0.0   # hone: -5.0..5.0
X6 = 0.0   # hone: -5.0..5.0
