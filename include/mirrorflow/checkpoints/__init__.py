"""Checkpoints: MM2-compatible offset translation from offset syncs to downstream consumer-group offsets."""
