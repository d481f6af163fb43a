
*€|€ÿ÷Btyped_float16