"""Ten knobs of which two matter."""

K01 = 0.5                # hone: 0.0..1.0
K02 = 0.01               # hone: log 1e-4..1.0
K03 = 0.5                # hone: 0.0..1.0
K04 = 8                  # hone: int 1..16
K05 = 0.5                # hone: 0.0..1.0
K06 = 0.5                # hone: 0.0..1.0
K07 = 0.1                # hone: log 1e-3..10.0
K08 = 0.5                # hone: 0.0..1.0
K09 = 32                 # hone: int 1..64
K10 = 0.5                # hone: 0.0..1.0
