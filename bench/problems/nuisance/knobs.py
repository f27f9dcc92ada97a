"""Twenty knobs of which three matter: the rest are nuisance."""

LEARNING_RATE = 0.3     # hone: log 1e-4..1.0
MOMENTUM = 0.5          # hone: 0.0..0.99
BATCH = 256             # hone: int log 8..1024
NUISANCE_01 = 0.62     # hone: 0.0..1.0
NUISANCE_02 = 0.74     # hone: 0.0..1.0
NUISANCE_03 = 0.80     # hone: 0.0..1.0
NUISANCE_04 = 0.94     # hone: 0.0..1.0
NUISANCE_05 = 0.74     # hone: 0.0..1.0
NUISANCE_06 = 0.92     # hone: 0.0..1.0
NUISANCE_07 = 0.03     # hone: 0.0..1.0
NUISANCE_08 = 0.47     # hone: 0.0..1.0
NUISANCE_09 = 0.94     # hone: 0.0..1.0
NUISANCE_10 = 0.65     # hone: 0.0..1.0
NUISANCE_11 = 0.90     # hone: 0.0..1.0
NUISANCE_12 = 0.11     # hone: 0.0..1.0
NUISANCE_13 = 0.47     # hone: 0.0..1.0
NUISANCE_14 = 0.25     # hone: 0.0..1.0
NUISANCE_15 = 0.54     # hone: 0.0..1.0
NUISANCE_16 = 0.57     # hone: 0.0..1.0
NUISANCE_17 = 0.01     # hone: 0.0..1.0
