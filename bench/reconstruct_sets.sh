# Sourced by bench/reconstruct_compare.sh and bench/reconstruct_seeds.sh: the images,
# ground truth (sfm_eval's options) and ground-truth intrinsics (`reconstruct --intrinsics`,
# empty where the set has none) of each multi-view set under $data
# (TIEPOINT_SHARED_DATA/multiview).
set_images() {
  case $1 in
    temple) ls "$data"/middlebury/templeSparseRing/*.png ;;
    dino) ls "$data"/middlebury/dinoSparseRing/*.png ;;
    fountain) ls "$data"/strecha_fountain_p11/images/*.jpg ;;
    balbianello) ls "$data"/gtsam_balbianello/*.jpg ;;
    kitti) ls "$data"/kitti_odometry_00_excerpt/sequences/00/image_0/*.png ;;
  esac
}
set_gt() {
  case $1 in
    temple) echo "--gt-par $(ls "$data"/middlebury/templeSparseRing/*_par.txt)" ;;
    dino) echo "--gt-par $(ls "$data"/middlebury/dinoSparseRing/*_par.txt)" ;;
    fountain) echo "--gt-par $data/strecha_fountain_p11/fountain_par_DERIVED.txt" ;;
    balbianello) echo "--gt-bundler $data/gtsam_balbianello/Balbianello.out --names $(cd "$data"/gtsam_balbianello && ls *.jpg | paste -sd,)" ;;
    kitti) echo "--gt-kitti $data/kitti_odometry_00_excerpt/poses/00.txt" ;;
  esac
}
set_intrinsics() {
  case $1 in
    temple) ls "$data"/middlebury/templeSparseRing/*_par.txt ;;
    dino) ls "$data"/middlebury/dinoSparseRing/*_par.txt ;;
    fountain) echo "$data/strecha_fountain_p11/fountain_par_DERIVED.txt" ;;
    *) echo "" ;;
  esac
}
