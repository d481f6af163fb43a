B	head_sinkJ
Ú?N-¿¥Á¿cŸ£¿