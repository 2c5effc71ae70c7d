# The small training run of the multi-process shell tests, sourced by tests/cli/multinode/test_*.sh.
#
# Contract:
#  - small_train_args DATA OUTPUT_DIR EPOCHS [FLAG...]: echoes `train` and its flags for
#    xcit_nano_4_p4 on the first 128 images of DATA (Fashion-MNIST's IDX layout): 2 global crops
#    of 28 px and 2 local of 12 px, a 64/64/32 DINO head, 8 images per rank, EPOCHS epochs (the
#    first a warm-up), one loader worker, seed 0, no checkpointNNNN.pth (--saveckp_freq 100),
#    writing OUTPUT_DIR; then the FLAGs. For an unquoted $(...) (DATA and OUTPUT_DIR hold no
#    spaces): `dino launch ... -- $(small_train_args ...)`; `| cut -d' ' -f2-` drops `train`.

small_train_args() {  # DATA OUTPUT_DIR EPOCHS [FLAG...]
  echo train --data_path "$1" --max_samples 128 --arch xcit_nano_4_p4 \
    --global_crops_size 28 --local_crops_size 12 --local_crops_number 2 --out_dim 64 \
    --head_hidden_dim 64 --head_bottleneck_dim 32 --batch_size_per_gpu 8 --epochs "$3" \
    --warmup_epochs 1 --num_workers 1 --saveckp_freq 100 --seed 0 --output_dir "$2" "${@:4}"
}
