// Hardware-bound device keys and action-bound challenges
