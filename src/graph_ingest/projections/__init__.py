"""The read side: the projector folds the operations topic into read tables of their own
(``<store schema>_read``), and the read service (``queries``) answers from them."""
