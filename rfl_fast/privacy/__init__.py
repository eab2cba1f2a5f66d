"""Differential privacy for Riemannian federated learning (Huang et al. 2024, PriRFed).

Mechanism building blocks: per-sample clipping in the manifold's metric and fused clipped sums
(``clipping``), tangent Gaussian noise (``noise``). Accounting (``accounting``): the seed's
closed-form noise calibrations and Theorem 9, tight RDP/PLD accountants after Google's
``dp-accounting`` (the RDP of batches drawn without replacement, what PriRFed runs, computed by
``rdp`` without it; Poisson sampling and PLD need the optional extra ``rfl_fast[privacy]``),
``calibrate_sigma`` and
``privacy_report``. One client's privacy as rounds compose (``accountant``): the
:class:`Accountant` both a run's ledger and a Flower client's guard use. The ledger of a
PriRFed run (``ledger``): its noise and the privacy spent after every round.
"""

from .accounting import (DPSettings, PrivacyBudget, calibrate_sigma, dp_rsgd_epsilon,
                         dp_rsgd_sigma, dp_rsvrg_epsilon, dp_rsvrg_sigma, epsilon_pld,
                         epsilon_rdp, epsilon_seed, epsilon_seed_composition,
                         epsilon_subsampled_gaussian, gaussian_mechanism_epsilon,
                         gaussian_mechanism_sigma, pld_discretization, privacy_report)
from .accountant import Accountant
from .clipping import (clip, clip_factors, clipped_sum_frechet, clipped_sum_pca,
                       clipped_sum_reference, frechet_sample_rgrads, pca_sample_rgrads)
from .ledger import PrivacyLedger
from .noise import gaussian_tangent_noise

__all__ = [
    # mechanism
    "clip", "clip_factors", "clipped_sum_reference", "clipped_sum_pca", "clipped_sum_frechet",
    "pca_sample_rgrads", "frechet_sample_rgrads", "gaussian_tangent_noise",
    # accounting
    "gaussian_mechanism_sigma", "gaussian_mechanism_epsilon", "dp_rsgd_sigma", "dp_rsgd_epsilon",
    "dp_rsvrg_sigma", "dp_rsvrg_epsilon", "epsilon_seed_composition", "epsilon_seed",
    "DPSettings", "epsilon_subsampled_gaussian", "epsilon_rdp", "epsilon_pld", "calibrate_sigma",
    "PrivacyBudget", "privacy_report", "pld_discretization",
    # composition and the run's ledger
    "Accountant", "PrivacyLedger",
]
