"""How fast the engine compiles: scaling, a cold start, split compiles, queued jobs, Ray."""
