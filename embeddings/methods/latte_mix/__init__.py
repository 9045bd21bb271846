"""Latte-Mix (and the token VAE baselines): its declaration (``embeddings.methods.declaration``)."""

from sts_lightning.embeddings.methods.declaration import MethodDeclaration, Paper, ScorerGroup, Tiny
from sts_lightning.embeddings.methods.rules import POSITIVE, Rule

METHOD = MethodDeclaration(
    name="latte_mix", title="Latte-Mix (token VAE)", kind="trained",
    summary="a token VAE on frozen token states (categorical latents; `normal`, `ae` baselines); a sentence is the "
            "mixture of its tokens' posteriors, compared by cosine, Jensen-Shannon or L2",
    paper=Paper("Latte-Mix: Measuring Sentence Semantic Similarity with Latent Categorical Mixtures",
                "Minghan Li, He Bai, Luchen Tan, Kun Xiong, Ming Li, Jimmy Lin", "arXiv:2010.11351", 2020,
                "https://arxiv.org/abs/2010.11351"),
    export="sts-lightning/token-vae", data="token_states",
    module="sts_lightning.lightning_modules.latte_mix:LatteMixModule",
    rules={"tau": POSITIVE, "score_tau": Rule(float, 0, low_open=True, nullable=True), "min_lr": POSITIVE,
           "beta_warmup_ratio": Rule(float, 0, 1, low_open=True)},
    scorers=(ScorerGroup(("latte_mix",), "sts_lightning.embeddings.methods.latte_mix.scorer:LatteMixExportScorer",
                         "Registry entry ``{name: latte_mix, path: <export dir>, distance: cosine|js|l2}`` on the "
                         "configured encoder; js and l2 score as similarity = -distance (higher = more similar).",
                         options=("path", "distance", "batch_size", "allow_other_encoder"), required=("path",)),),
    tiny=Tiny(data=("data.files=[nli:snli:dev]", "data.cache_dir={cache_dir}"),
              model=("model.latent_dim=4", "model.num_classes=5", "model.hidden_dim=16"),
              options=(("model.latent=normal", "model.encoder_layers=2"), ("model.latent=ae", "data.dtype=float16"))),
    aliases=("token_vae",),  # the module's name before issue 17, in older run directories' saved configs
)
