"""SGLang 0.5.23's own serving stack on CPU, with a stand-in scheduler, as a test oracle."""
