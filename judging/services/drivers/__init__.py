"""One driver module per judge method; `judging.methods.registry` names which."""
